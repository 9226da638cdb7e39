#!/usr/bin/python3
"""Shared base of sbx's loopback fakes of hosted sandbox APIs (tests/fakes/*.py).

Python 3 standard library only. A fake is a Provider subclass handed to run():

    import fakelib

    class MyFake(fakelib.Provider):
        name = "myprovider"

        @classmethod
        def add_arguments(cls, parser):          # optional: extra command-line options
            parser.add_argument("--api-key", default="k")

        def error_body(self, status, message):   # optional: the provider's own error JSON
            return fakelib.json_bytes({"code": status, "message": message}), "application/json"

        def handle(self, req):                   # every API request (control ones excluded)
            if req.method == "GET" and req.path == "/things":
                return req.send_json(200, [])
            raise fakelib.HTTPError(404, "no route")

        def state(self):                         # GET /_fake/state
            return {}

        def close(self):                         # shutdown: remove backing sandboxes
            pass

        fault_kinds = ("my_kind",)               # optional: kinds of its own, left in req.fault
        def control(self, req):                  # optional: /_fake/ routes of its own
            raise fakelib.HTTPError(404, "no control route")

    if __name__ == "__main__":
        fakelib.run(MyFake)

Command line (run() parses it): --sbx PATH (the sbx binary), --sbx-home DIR (a private
SBX_HOME for the fake's own sandboxes), --port-file FILE (the port, written atomically once
listening), [--verbose] (one line per request on stderr), [--tls-cert PEM --tls-key PEM
[--tls-client-ca PEM]]
(serve HTTPS with that certificate, control API included), plus the provider's options.
The server listens on 127.0.0.1, ephemeral port, threaded HTTP/1.1 with keep-alive, and
prints "NAME fake listening on http://127.0.0.1:PORT" (https:// with TLS) on stdout once
ready. SIGTERM or
SIGINT: stop serving, end stalls, call Provider.close(), then `sbx rm -f` every backing
sandbox still left, exit 0.

run() constructs the provider as cls(args, sbx, server) (an __init__ of its own calls
super().__init__(args, sbx, server)), which sets self.args (argparse namespace), self.sbx
(an Sbx), self.server (the FakeServer: .shutting_down is a threading.Event, .port,
.add_ticker(interval, fn) calls fn() every interval seconds until shutdown).

Request (the `req` handed to handle()):
    req.method, req.path (no query), req.query_string, req.query (dict: name -> list),
    req.arg(name, default=None) (first value), req.headers (http.client.HTTPMessage,
    case-insensitive .get), req.body (bytes, read on first use; chunked bodies are
    supported), req.json() (parsed body; HTTPError 400 when it is not JSON),
    req.fault (the response fault armed for this request, or None)
    req.send(status, body=b"", ctype=None, headers=None)     plain response
    req.send_json(status, obj, headers=None)
    req.send_error(status, message, headers=None)            Provider.error_body's JSON
    req.stream(status=200, ctype, headers=None, framing="connect"|"lines") -> Stream
        stream.send(payload)   one message (connect: envelope flags 0x00; lines: as given)
        stream.end(payload)    connect: the end-of-stream envelope (flags 0x02); lines: the
                               payload if any; then the chunked body ends
        stream.abort()         close the connection at once
      Streams use chunked transfer encoding. send/end raise ClientGone when the client went
      away or a fault closed the stream: handlers stop their work in a finally block.
    req.websocket(protocol=None) -> WebSocket   answers 101 to an RFC 6455 upgrade (400
                               HTTPError when the request is not one); the connection is the
                               WebSocket's from then on:
        ws.recv() -> (opcode, payload) of the next message (1 text, 2 binary, 8 close), None
                     at EOF; pings are answered, fragments joined, messages bounded
        ws.send_binary(data), ws.send_text(str), ws.close(code=1000) (once), ws.abort()
    Raising HTTPError(status, message, headers=None) from handle() sends req.send_error;
    any other exception is a 500.

Backing sandboxes: Sbx(path, home) drives the real sbx binary with SBX_HOME=home:
    sbx.create(env={K: V}, args=[]) -> id           sbx create -e K=V ...
    sbx.exec(id, argv, env=None, cwd=None, user=None, timeout_ms=None, stdin=False) -> Exec
    sbx.run(id, argv, input=None, env=None, cwd=None, user=None, timeout_ms=None)
        -> ExecResult(.stdout, .stderr, .exit)      the whole output at once
    sbx.pause(id, release=False), sbx.resume(id), sbx.rm(id)   raise SbxError on failure
                                                    (release: end the processes, keep files)
    sbx.read_file(id, path, user=None) -> bytes     FileNotFoundError, IsADirectoryError,
                                                    PermissionError, SbxError
    sbx.write_file(id, path, data, user=None)       parents created; IsADirectoryError,
                                                    NotADirectoryError, PermissionError
    sbx.fs(id, op, *args, user=None) -> JSON        op: "stat" PATH, "list" PATH DEPTH,
        "mkdir" PATH (-> {"created": bool, "entry"}), "remove" PATH, "move" SRC DST
        (-> entry); entries are {name, path, type: file|dir|symlink|other, size, mode
        (st_mode), perm (st_mode & 0o7777), permissions ("-rw-r--r--"), uid, gid, owner,
        group, mtime (float seconds), mtime_ns, symlink_target?}; errors raise the OSError
        subclass of their errno (FileNotFoundError, FileExistsError, NotADirectoryError, ...)
    sbx.can_switch_user: `sbx exec -u` works only when sbx runs as root; when the fake runs
        unprivileged, exec/run/read_file/write_file/fs ignore `user` (only uid 0 exists
        inside such a sandbox).
Exec (a running command; its stdout and stderr stream separately, as they arrive):
    ex.events(keepalive=None) yields ("start", pid), ("stdout", bytes), ("stderr", bytes),
        ("keepalive", None) after `keepalive` idle seconds, and last ("end", ExitInfo)
    ex.pid (the command's pid inside the sandbox, None until started), ex.wait_started(t)
    ex.write(data), ex.close_stdin(), ex.signal(signum) (sbx exec ID kill -SIG -PID),
    ex.kill() (SIGKILL), ex.wait(timeout=None) -> ExitInfo or None, ex.done (bool)
    The command leads a process group of its own: signal() and timeout_ms (SIGKILL after
    that many milliseconds) reach its children too.
ExitInfo: .exited (bool: a normal exit), .code (exit status or None), .signal (number or
    None), .core, .timed_out (timeout_ms fired), .error (sbx could not start it: its
    message), .rc (sbx exec's own status); .go_status() -> "exit status 1" /
    "signal: killed" (Go's os.ProcessState wording); .exit_code() -> code, or -1 when the
    command did not exit normally. Signal deaths are told apart from exit statuses by a
    small perl wrapper run inside the sandbox: it reports the command's pid and how it
    ended on stderr, behind a random marker the Exec strips.

Control API (no auth, identical in every fake; never logged, never faulted):
    POST   /_fake/faults     one fault or a list: {"match": "METHOD PATH-REGEX",
                             "kind": K, "times": N (default 1; 0: forever), ...}; METHOD may
                             be "*"; re.search on the path without the query string
    GET    /_fake/faults     the armed faults      DELETE /_fake/faults   clears them
    GET    /_fake/requests   [{"method","path","query","headers"}] of every API request, in
                             order ("query": the raw query string; "headers": name -> value)
    DELETE /_fake/requests   clears the log
    GET    /_fake/state      Provider.state()
    any other /_fake/ path   Provider.control(req) (404 by default)
Fault kinds (checked after the request is logged and before the provider sees it, i.e.
before auth):
    status        answer "status" (int) with optional "headers" {name: value} and "body"
                  (string; default: Provider.error_body for that status)
    stall         wait "seconds" (default 30; ends early at shutdown), then go on normally
    invalid_json  the normal success status, a body that is not JSON (a plain response:
                  Provider.invalid_json_body; a stream: the first message's payload is not
                  JSON, then the connection closes)
    truncate      a plain response: Content-Length larger than what is sent, then close; a
                  stream: the first "events" messages (default 1), then close without the
                  end message or the end of the chunked body
    bad_frame     a Connect stream: an envelope header announcing 0x7ffffff0 bytes, a few
                  bytes, close; a lines stream: bytes that are not UTF-8 and no newline,
                  close; a plain response: as invalid_json
"""
import argparse
import base64
import hashlib
import http.server
import json
import os
import queue
import re
import secrets
import signal
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.parse

__all__ = [
    "ClientGone", "ExecResult", "ExitInfo", "Exec", "FakeServer", "HTTPError", "Provider",
    "Request", "Sbx", "SbxError", "Stream", "WebSocket", "connect_envelope", "go_signal_name",
    "json_bytes", "new_id", "parse_connect_envelopes", "parse_multipart", "run", "utc_iso",
]


# --- small functions --------------------------------------------------------------------------

def json_bytes(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def new_id(length=20, alphabet="abcdefghijklmnopqrstuvwxyz0123456789"):
    """A random id of lowercase letters and digits."""
    return "".join(secrets.choice(alphabet) for _ in range(length))


def utc_iso(t=None, frac=True):
    """RFC 3339 UTC time: 2026-01-02T03:04:05.123456Z (frac=False: no fraction)."""
    if t is None:
        t = time.time()
    s = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    if frac:
        s += ".%06d" % int((t % 1) * 1e6)
    return s + "Z"


def connect_envelope(flags, payload):
    """One Connect envelope: flags byte, big-endian uint32 length, payload."""
    if isinstance(payload, str):
        payload = payload.encode()
    return struct.pack(">BI", flags, len(payload)) + payload


def parse_connect_envelopes(data):
    """[(flags, payload)] of a Connect streaming request body; ValueError when malformed."""
    out, i = [], 0
    while i < len(data):
        if len(data) - i < 5:
            raise ValueError("short envelope header")
        flags, n = struct.unpack(">BI", data[i:i + 5])
        if len(data) - i - 5 < n:
            raise ValueError("envelope announces %d bytes, %d present" % (n, len(data) - i - 5))
        out.append((flags, data[i + 5:i + 5 + n]))
        i += 5 + n
    return out



def marker_prefix_len(buf, mark):
    """How many bytes at the end of buf could start mark: held back until more arrives."""
    for k in range(min(len(mark) - 1, len(buf)), 0, -1):
        if buf.endswith(mark[:k]):
            return k
    return 0

class Part:
    def __init__(self, headers, data):
        self.headers = headers          # lowercased name -> value
        self.data = data
        disp = headers.get("content-disposition", "")
        self.name = _disp_param(disp, "name")
        self.filename = _disp_param(disp, "filename")

    def __repr__(self):
        return "Part(name=%r, filename=%r, %d bytes)" % (self.name, self.filename, len(self.data))


def _disp_param(disp, key):
    m = re.search(r'(?:^|;)\s*' + key + r'\*?=\s*("((?:[^"\\]|\\.)*)"|[^;]*)', disp, re.I)
    if not m:
        return None
    if m.group(2) is not None:
        return re.sub(r'\\(.)', r'\1', m.group(2))
    v = m.group(1).strip()
    if "''" in v:   # RFC 5987: utf-8''percent-encoded
        v = urllib.parse.unquote(v.split("''", 1)[1])
    return v


def parse_multipart(body, content_type):
    """[Part] of a multipart/form-data body; ValueError when malformed."""
    m = re.search(r'boundary=("([^"]+)"|[^;\s]+)', content_type or "")
    if not m:
        raise ValueError("multipart without a boundary")
    boundary = (m.group(2) or m.group(1)).encode()
    delim = b"--" + boundary
    if not body.startswith(delim):
        i = body.find(b"\r\n" + delim)
        if i < 0:
            raise ValueError("multipart boundary not found")
        body = body[i + 2:]
    parts = []
    pos = len(delim)
    while True:
        if body[pos:pos + 2] == b"--":
            return parts
        if body[pos:pos + 2] != b"\r\n":
            raise ValueError("malformed multipart delimiter")
        pos += 2
        end = body.find(b"\r\n" + delim, pos)
        if end < 0:
            raise ValueError("multipart body not closed")
        chunk = body[pos:end]
        hend = chunk.find(b"\r\n\r\n")
        if hend < 0:
            if chunk.endswith(b"\r\n") or not chunk:
                head, data = chunk, b""
            else:
                raise ValueError("multipart part without headers end")
        else:
            head, data = chunk[:hend], chunk[hend + 4:]
        headers = {}
        for line in head.decode("utf-8", "replace").split("\r\n"):
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        parts.append(Part(headers, data))
        pos = end + 2 + len(delim)


# Go's names for signals (syscall.Signal.String), as os.ProcessState prints them
_GO_SIGNALS = {
    1: "hangup", 2: "interrupt", 3: "quit", 4: "illegal instruction", 5: "trace/breakpoint trap",
    6: "aborted", 7: "bus error", 8: "floating point exception", 9: "killed",
    10: "user defined signal 1", 11: "segmentation fault", 12: "user defined signal 2",
    13: "broken pipe", 14: "alarm clock", 15: "terminated", 16: "stack fault",
    17: "child exited", 18: "continued", 19: "stopped (signal)", 20: "stopped",
    21: "stopped (tty input)", 22: "stopped (tty output)", 23: "urgent I/O condition",
    24: "CPU time limit exceeded", 25: "file size limit exceeded", 26: "virtual timer expired",
    27: "profiling timer expired", 28: "window changed", 29: "I/O possible",
    30: "power failure", 31: "bad system call",
}


def go_signal_name(n):
    return _GO_SIGNALS.get(n, "signal %d" % n)


# --- backing sandboxes: the real sbx ----------------------------------------------------------

class SbxError(Exception):
    def __init__(self, message, rc=None):
        super().__init__(message)
        self.rc = rc


def go_exec_error(eno, text):
    """The start error Go's os/exec gives for errno eno ("PATH: strerror" from the wrapper)."""
    path = text.rpartition(": ")[0] or text
    if eno == "2":
        if "/" not in path:
            return 'exec: "%s": executable file not found in $PATH' % path
        return "fork/exec %s: no such file or directory" % path
    if eno == "13":
        return "fork/exec %s: permission denied" % path
    if eno == "8":
        return "fork/exec %s: exec format error" % path
    return text or "exec failed"


class ExitInfo:
    def __init__(self, rc, exited=False, code=None, sig=None, core=False, timed_out=False,
                 error=None):
        self.rc, self.exited, self.code, self.signal = rc, exited, code, sig
        self.core, self.timed_out, self.error = core, timed_out, error

    def go_status(self):
        if self.exited:
            return "exit status %d" % self.code
        if self.signal is not None:
            return "signal: " + go_signal_name(self.signal) + \
                (" (core dumped)" if self.core else "")
        return "exit status %d" % (self.rc if self.rc is not None else -1)

    def exit_code(self):
        return self.code if self.exited else -1

    def as_dict(self):
        return {k: getattr(self, k) for k in
                ("rc", "exited", "code", "signal", "core", "timed_out", "error")}

    def __repr__(self):
        return "ExitInfo(%r)" % self.as_dict()


class ExecResult:
    def __init__(self, stdout, stderr, exit):
        self.stdout, self.stderr, self.exit = stdout, stderr, exit


# runs argv as a child, reports "<marker>start PID", then "<marker>exit N" or
# "<marker>signal N [core]" on stderr; "<marker>execfail ERRNO TEXT" when exec fails
_WRAPPER = r'''
use POSIX ();
my $m = shift @ARGV;
pipe(my $r, my $w) or do { syswrite STDERR, "${m}execfail 0 pipe: $!\n"; exit 127 };
my $pid = fork();
if (!defined $pid) { syswrite STDERR, "${m}execfail 0 fork: $!\n"; exit 127 }
if ($pid == 0) {
    POSIX::setpgid(0, 0);
    close $w;
    my $b;
    sysread($r, $b, 1);
    close $r;
    { no warnings; exec { $ARGV[0] } @ARGV; }
    my $e = $! + 0;
    syswrite STDERR, "${m}execfail $e $ARGV[0]: $!\n";
    POSIX::_exit(127);
}
close $r;
syswrite STDERR, "${m}start $pid\n";
close $w;
$SIG{PIPE} = 'IGNORE';
my $got;
do { $got = waitpid($pid, 0) } while ($got == -1 && $!{EINTR});
my $st = $?;
if ($st & 127) {
    syswrite STDERR, "${m}signal " . ($st & 127) . (($st & 128) ? " core" : "") . "\n";
    POSIX::_exit(128 + ($st & 127));
}
syswrite STDERR, "${m}exit " . ($st >> 8) . "\n";
POSIX::_exit($st >> 8);
'''

# file operations inside the sandbox (its python3 is the host's /usr/bin/python3)
_FS = r'''
import grp, json, os, pwd, shutil, stat, sys
def perms(m):
    t = "d" if stat.S_ISDIR(m) else "l" if stat.S_ISLNK(m) else "-"
    return t + "".join(c if m & b else "-" for c, b in zip("rwxrwxrwx",
        (0o400, 0o200, 0o100, 0o40, 0o20, 0o10, 0o4, 0o2, 0o1)))
def name_of(f, i):
    try:
        return f(i)[0]
    except KeyError:
        return str(i)
def entry(p):
    st = os.lstat(p)
    m = st.st_mode
    t = "dir" if stat.S_ISDIR(m) else "file" if stat.S_ISREG(m) else \
        "symlink" if stat.S_ISLNK(m) else "other"
    e = {"name": os.path.basename(p.rstrip("/")) or "/", "path": p, "type": t,
         "size": st.st_size, "mode": m, "perm": m & 0o7777, "permissions": perms(m),
         "uid": st.st_uid, "gid": st.st_gid, "owner": name_of(pwd.getpwuid, st.st_uid),
         "group": name_of(grp.getgrgid, st.st_gid), "mtime": st.st_mtime,
         "mtime_ns": st.st_mtime_ns}
    if t == "symlink":
        e["symlink_target"] = os.path.realpath(p)
        try:
            e["target_type"] = "dir" if os.path.isdir(p) else "file"
        except OSError:
            pass
    return e
def walk(p, depth, out):
    for n in sorted(os.listdir(p)):
        c = os.path.join(p, n)
        e = entry(c)
        out.append(e)
        if depth > 1 and e["type"] == "dir":
            walk(c, depth - 1, out)
try:
    op, a = sys.argv[1], sys.argv[2:]
    if op == "stat":
        r = entry(a[0])
    elif op == "list":
        if not os.path.isdir(a[0]):
            os.lstat(a[0])
            raise NotADirectoryError(20, "Not a directory", a[0])
        r = []
        walk(a[0], int(a[1]) if len(a) > 1 else 1, r)
    elif op == "mkdir":
        created = True
        try:
            os.makedirs(a[0])
        except FileExistsError:
            if not os.path.isdir(a[0]):
                raise
            created = False
        r = {"created": created, "entry": entry(a[0])}
    elif op == "remove":
        os.lstat(a[0])
        if os.path.isdir(a[0]) and not os.path.islink(a[0]):
            shutil.rmtree(a[0])
        else:
            os.unlink(a[0])
        r = {}
    elif op == "move":
        os.lstat(a[0])
        d = os.path.dirname(a[1])
        if d:
            os.makedirs(d, exist_ok=True)
        os.rename(a[0], a[1])
        r = entry(a[1])
    else:
        raise ValueError("unknown op " + op)
    sys.stdout.write(json.dumps({"ok": r}))
except OSError as e:
    sys.stdout.write(json.dumps({"errno": e.errno or 0, "error": e.strerror or str(e),
                                 "path": e.filename}))
'''

_READ = r'''p=$1
if [ -d "$p" ]; then exit 21; fi
if [ ! -e "$p" ]; then exit 2; fi
if [ ! -r "$p" ]; then exit 13; fi
exec cat -- "$p"'''

_WRITE = r'''p=$1
if [ -d "$p" ]; then exit 21; fi
d=$(dirname -- "$p")
if [ ! -d "$d" ]; then
    mkdir -p -- "$d" 2>/dev/null || { [ -e "$d" ] || [ -L "$d" ] && exit 20; exit 13; }
fi
cat > "$p" 2>/dev/null || exit 13'''

_ERRNO_EXC = {2: FileNotFoundError, 13: PermissionError, 1: PermissionError,
              17: FileExistsError, 20: NotADirectoryError, 21: IsADirectoryError,
              39: OSError}


def _oserror(errno_, text, path=None):
    cls = _ERRNO_EXC.get(errno_, OSError)
    return cls(errno_, text, path)


class Sbx:
    """Drives the sbx binary with a private SBX_HOME (see the module docstring)."""

    def __init__(self, path, home, verbose=False):
        self.path = os.path.abspath(path)
        self.home = os.path.abspath(home)
        os.makedirs(self.home, exist_ok=True)
        self.verbose = verbose
        self.can_switch_user = os.geteuid() == 0
        self.env = dict(os.environ)
        self.env["SBX_HOME"] = self.home
        for k in ("SBX_DEBUG", "SBX_TEST_CRASH_AT"):
            self.env.pop(k, None)
        self.created = set()
        self.execs = set()
        self.lock = threading.Lock()

    def _log(self, *a):
        if self.verbose:
            print("sbx:", *a, file=sys.stderr, flush=True)

    def cmd(self, args, input=None, timeout=120):
        """Runs sbx ARGS; CompletedProcess with bytes stdout/stderr."""
        self._log(*args)
        return subprocess.run([self.path] + list(args), input=input, capture_output=True,
                              env=self.env, timeout=timeout,
                              stdin=None if input is not None else subprocess.DEVNULL)

    def _check(self, args, input=None, timeout=120):
        r = self.cmd(args, input=input, timeout=timeout)
        if r.returncode != 0:
            raise SbxError(r.stderr.decode("utf-8", "replace").strip() or
                           "sbx %s exited %d" % (args[0], r.returncode), r.returncode)
        return r

    def create(self, env=None, args=()):
        a = ["create"]
        for k, v in (env or {}).items():
            a += ["-e", "%s=%s" % (k, v)]
        a += list(args)
        sid = self._check(a).stdout.decode().strip()
        with self.lock:
            self.created.add(sid)
        return sid

    def pause(self, sid, release=False):
        self._check(["pause"] + (["--release"] if release else []) + [sid])

    def resume(self, sid):
        self._check(["resume", sid])

    def rm(self, sid):
        try:
            self._check(["rm", "-f", sid])
        finally:
            with self.lock:
                self.created.discard(sid)

    def inspect(self, sid):
        return json.loads(self._check(["inspect", sid]).stdout)

    def _exec_args(self, sid, argv, env, cwd, user, stdin):
        a = ["exec"]
        if cwd:
            a += ["-w", cwd]
        for k, v in (env or {}).items():
            a += ["-e", "%s=%s" % (k, v)]
        if user is not None and self.can_switch_user:
            a += ["-u", str(user)]
        if stdin:
            a.append("-i")
        return a + [sid, "--"] + list(argv)

    def exec(self, sid, argv, env=None, cwd=None, user=None, timeout_ms=None, stdin=False):
        return Exec(self, sid, argv, env, cwd, user, timeout_ms, stdin)

    def run(self, sid, argv, input=None, env=None, cwd=None, user=None, timeout_ms=None,
            timeout=120):
        ex = self.exec(sid, argv, env=env, cwd=cwd, user=user, timeout_ms=timeout_ms,
                       stdin=input is not None)
        out, err = [], []
        if input is not None:
            threading.Thread(target=_feed, args=(ex, input), daemon=True).start()
        end = None
        deadline = time.monotonic() + timeout
        for kind, val in ex.events(keepalive=1):
            if kind == "stdout":
                out.append(val)
            elif kind == "stderr":
                err.append(val)
            elif kind == "end":
                end = val
            if time.monotonic() > deadline and end is None:
                ex.terminate()
        return ExecResult(b"".join(out), b"".join(err), end)

    def _plain(self, sid, argv, input=None, user=None, timeout=120):
        """sbx exec without the wrapper: CompletedProcess."""
        a = ["exec"]
        if user is not None and self.can_switch_user:
            a += ["-u", str(user)]
        if input is not None:
            a.append("-i")
        return self.cmd(a + [sid, "--"] + list(argv), input=input, timeout=timeout)

    def read_file(self, sid, path, user=None):
        r = self._plain(sid, ["sh", "-c", _READ, "sh", path], user=user)
        if r.returncode == 0:
            return r.stdout
        msg = r.stderr.decode("utf-8", "replace").strip()
        if r.returncode in (2, 13, 21):
            raise _oserror(r.returncode, os.strerror(r.returncode), path)
        raise SbxError(msg or "reading %s failed (%d)" % (path, r.returncode), r.returncode)

    def write_file(self, sid, path, data, user=None):
        r = self._plain(sid, ["sh", "-c", _WRITE, "sh", path], input=data, user=user)
        if r.returncode == 0:
            return
        if r.returncode in (13, 20, 21):
            raise _oserror(r.returncode, os.strerror(r.returncode), path)
        raise SbxError(r.stderr.decode("utf-8", "replace").strip() or
                       "writing %s failed (%d)" % (path, r.returncode), r.returncode)

    def fs(self, sid, op, *args, user=None):
        r = self._plain(sid, ["/usr/bin/python3", "-c", _FS, op] + [str(a) for a in args],
                        user=user)
        try:
            res = json.loads(r.stdout)
        except ValueError:
            raise SbxError(r.stderr.decode("utf-8", "replace").strip() or
                           "fs %s failed (%d)" % (op, r.returncode), r.returncode)
        if "ok" in res:
            return res["ok"]
        raise _oserror(res["errno"], res["error"], res.get("path"))

    def close(self):
        """Ends every running exec and removes every sandbox this Sbx created."""
        with self.lock:
            execs, ids = list(self.execs), list(self.created)
        for ex in execs:
            ex.terminate()
        for sid in ids:
            try:
                self.rm(sid)
            except Exception as e:  # keep going: remove the others
                print("sbx rm -f %s: %s" % (sid, e), file=sys.stderr, flush=True)


def _feed(ex, data):
    try:
        ex.write(data)
    finally:
        ex.close_stdin()


class Exec:
    """A command running in a backing sandbox (see the module docstring)."""

    def __init__(self, sbx, sid, argv, env, cwd, user, timeout_ms, stdin):
        self.sbx, self.sid, self.argv = sbx, sid, list(argv)
        self.marker = ("\x1eSBXFAKE%s " % secrets.token_hex(8)).encode()
        self.pid = None
        self.info = None
        self.done = False
        self._q = queue.Queue()
        self._started = threading.Event()
        self._ended = threading.Event()
        self._err_done = threading.Event()
        self._end_mark = threading.Event()
        self._pre = []          # what sbx itself said before the command started
        self._marks = {}
        self._wlock = threading.Lock()
        self.timeout_ms = timeout_ms
        self._timed_out = False   # before _reap can look at it
        args = sbx._exec_args(sid, ["perl", "-e", _WRAPPER, self.marker.decode()] + self.argv,
                              env, cwd, user, stdin)
        sbx._log(*args[:-len(self.argv) - 3], "...", *self.argv)
        self.proc = subprocess.Popen([sbx.path] + args, env=sbx.env,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with sbx.lock:
            sbx.execs.add(self)
        self._t_out = threading.Thread(target=self._read_out, daemon=True)
        self._t_err = threading.Thread(target=self._read_err, daemon=True)
        self._t_out.start()
        self._t_err.start()
        threading.Thread(target=self._reap, daemon=True).start()
        if timeout_ms:
            t = threading.Timer(timeout_ms / 1000.0, self._timeout)
            t.daemon = True
            t.start()

    def _timeout(self):
        if not self.done:
            self._timed_out = True
            self.wait_started(5)
            self.kill()

    # stdout: forwarded as it comes, once the command started (the wrapper holds it until then)
    def _read_out(self):
        fd = self.proc.stdout.fileno()
        first = True
        while True:
            try:
                b = os.read(fd, 65536)
            except OSError:
                break
            if not b:
                break
            if first:  # the start event comes first: the wrapper reports it on stderr
                first = False
                while not self._started.wait(0.05) and not self._err_done.is_set():
                    pass
            self._q.put(("stdout", b))

    def _read_err(self):
        fd = self.proc.stderr.fileno()
        m = self.marker
        buf = b""
        while True:
            try:
                b = os.read(fd, 65536)
            except OSError:
                b = b""
            if not b:
                break
            buf += b
            while True:
                i = buf.find(m)
                if i < 0:
                    keep = marker_prefix_len(buf, m)
                    self._err_data(buf[:len(buf) - keep])
                    buf = buf[len(buf) - keep:]
                    break
                self._err_data(buf[:i])
                rest = buf[i + len(m):]
                j = rest.find(b"\n")
                if j < 0:
                    buf = buf[i:]
                    break
                self._mark(rest[:j].decode("utf-8", "replace"))
                buf = rest[j + 1:]
        self._err_data(buf)
        self._err_done.set()

    def _err_data(self, b):
        if not b:
            return
        if self.pid is None and "execfail" not in self._marks:
            self._pre.append(b)
        else:
            self._q.put(("stderr", b))

    def _mark(self, line):
        word, _, rest = line.partition(" ")
        self._marks[word] = rest
        if word == "start":
            try:
                self.pid = int(rest)
            except ValueError:
                self.pid = -1
            self._q.put(("start", self.pid))
            self._started.set()
        elif word in ("exit", "signal"):
            self._end_mark.set()

    def _reap(self):
        rc = self.proc.wait()
        # the wrapper's last word, or stderr's end; a background child of the command may
        # hold the pipes open longer: its later output is not waited for
        deadline = time.monotonic() + 2
        while not self._end_mark.is_set() and not self._err_done.is_set() and \
                time.monotonic() < deadline:
            self._end_mark.wait(0.05)
        self._t_out.join(0.3)
        marks = self._marks
        pre = b"".join(self._pre).decode("utf-8", "replace").strip()
        if "execfail" in marks:
            eno, _, text = marks["execfail"].partition(" ")
            # as a shell says it: a file it cannot execute 126 (EACCES, ENOEXEC), else 127;
            # the error as Go's os/exec words it (what the real agents answer)
            code = 126 if eno in ("13", "8") else 127
            info = ExitInfo(rc, exited=True, code=code, error=go_exec_error(eno, text))
        elif "exit" in marks:
            info = ExitInfo(rc, exited=True, code=int(marks["exit"]))
        elif "signal" in marks:
            w = marks["signal"].split()
            info = ExitInfo(rc, sig=int(w[0]), core="core" in w[1:],
                            timed_out=self._timed_out and int(w[0]) == signal.SIGKILL)
        elif self.pid is None:
            info = ExitInfo(rc, exited=True, code=rc, error=pre or "sbx exec exited %d" % rc)
        elif rc > 128:
            info = ExitInfo(rc, sig=rc - 128)
        else:
            info = ExitInfo(rc, exited=True, code=rc)
        self.info = info
        self.done = True
        with self.sbx.lock:
            self.sbx.execs.discard(self)
        self._started.set()
        self._q.put(("end", info))
        self._ended.set()

    def events(self, keepalive=None):
        """Yields (kind, value) until ("end", ExitInfo); see the module docstring."""
        while True:
            try:
                ev = self._q.get(timeout=keepalive)
            except queue.Empty:
                yield ("keepalive", None)
                continue
            yield ev
            if ev[0] == "end":
                return

    def wait_started(self, timeout=None):
        self._started.wait(timeout)
        return self.pid

    def wait(self, timeout=None):
        self._ended.wait(timeout)
        return self.info

    def write(self, data):
        with self._wlock:
            if self.proc.stdin is None or self.proc.stdin.closed:
                raise BrokenPipeError("stdin is closed")
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def close_stdin(self):
        with self._wlock:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass

    @property
    def stdin_open(self):
        return self.proc.stdin is not None and not self.proc.stdin.closed

    def signal(self, signum):
        """Sends signum to the command's process group inside the sandbox (the command leads
        a group of its own, so its children get it too); True when kill succeeded."""
        if self.pid is None or self.pid <= 0 or self.done:
            return False
        r = self.sbx._plain(self.sid, ["sh", "-c", 'kill -s "$1" -- "-$2"', "sh",
                                       str(int(signum)), str(self.pid)], timeout=30)
        return r.returncode == 0

    def kill(self):
        return self.signal(signal.SIGKILL)

    def terminate(self):
        """Ends the command and the host's sbx exec (for shutdown and abandoned streams)."""
        if self.done:
            return
        try:
            self.kill()
        except Exception:
            pass
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# --- HTTP ---------------------------------------------------------------------------------

class HTTPError(Exception):
    def __init__(self, status, message=None, headers=None):
        super().__init__(message or "HTTP %d" % status)
        self.status = status
        self.message = message or http.server.BaseHTTPRequestHandler.responses.get(
            status, ("error",))[0]
        self.headers = headers or {}


class ClientGone(Exception):
    """The client went away, or a fault closed the connection on purpose."""


class Stream:
    def __init__(self, req, framing):
        self.req = req
        self.framing = framing
        self.sent = 0
        self.closed = False
        self.fault = req.fault
        req.fault = None

    def _chunk(self, data):
        if self.closed:
            raise ClientGone("stream closed")
        if not data:
            return
        try:
            self.req.h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.req.h.wfile.flush()
        except (OSError, ValueError) as e:
            self.closed = True
            self.req.h.close_connection = True
            raise ClientGone(str(e))

    def _frame(self, payload, flags=0):
        if isinstance(payload, str):
            payload = payload.encode()
        if self.framing == "connect":
            return connect_envelope(flags, payload)
        return payload

    def send(self, payload):
        f = self.fault
        if f is not None and self.sent == 0 and f["kind"] in ("invalid_json", "bad_frame"):
            if f["kind"] == "invalid_json":
                self._chunk(self._frame(b'{"event": {"start": '))
            elif self.framing == "connect":
                self._chunk(struct.pack(">BI", 0, 0x7ffffff0) + b'{"event":')
            else:
                self._chunk(b"\xff\xfe\xfd not an event")
            self.abort()
            raise ClientGone("fault %s" % f["kind"])
        self._chunk(self._frame(payload))
        self.sent += 1
        if f is not None and f["kind"] == "truncate" and self.sent >= int(f.get("events", 1)):
            self.abort()
            raise ClientGone("fault truncate")

    def end(self, payload=None):
        f = self.fault
        if f is not None and f["kind"] in ("invalid_json", "bad_frame") and self.sent == 0:
            self.send(payload if payload is not None else b"{}")
        if f is not None and f["kind"] == "truncate":
            self.abort()
            raise ClientGone("fault truncate")
        if self.framing == "connect":
            self._chunk(connect_envelope(2, payload if payload is not None else b"{}"))
        elif payload:
            self._chunk(self._frame(payload))
        try:
            self.req.h.wfile.write(b"0\r\n\r\n")
            self.req.h.wfile.flush()
        except (OSError, ValueError) as e:
            self.req.h.close_connection = True
            raise ClientGone(str(e))
        finally:
            self.closed = True

    def abort(self):
        self.closed = True
        self.req.h.close_connection = True
        try:
            self.req.h.wfile.flush()
        except (OSError, ValueError):
            pass
        try:
            self.req.h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Request:
    def __init__(self, handler, provider):
        self.h = handler
        self.provider = provider
        u = urllib.parse.urlsplit(handler.path)
        self.method = handler.command
        self.path = u.path
        self.query_string = u.query
        self.query = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        self.headers = handler.headers
        self.fault = None
        self.responded = False
        self._body = None

    @property
    def peer_cn(self):
        """The CN of the client certificate the TLS handshake checked (--tls-client-ca), or
        None."""
        c = self.h.connection
        cert = c.getpeercert() if isinstance(c, ssl.SSLSocket) else None
        for rdn in (cert or {}).get("subject", ()):
            for k, v in rdn:
                if k == "commonName":
                    return v
        return None

    def arg(self, name, default=None):
        v = self.query.get(name)
        return v[0] if v else default

    @property
    def body(self):
        if self._body is None:
            self._body = self.h.read_body()
        return self._body

    def json(self):
        try:
            return json.loads(self.body or b"null")
        except ValueError as e:
            raise HTTPError(400, "request body is not JSON: %s" % e)

    def _head(self, status, headers):
        self.responded = True
        self.h.send_response(status)
        for k, v in (headers or {}).items():
            for one in (v if isinstance(v, list) else [v]):   # a list: the header repeated
                self.h.send_header(k, str(one))

    def send(self, status, body=b"", ctype=None, headers=None):
        if isinstance(body, str):
            body = body.encode()
        f, self.fault = self.fault, None
        if f is not None and f["kind"] in ("invalid_json", "bad_frame") and status < 300:
            body = self.provider.invalid_json_body
        self._head(status, headers)
        if ctype and body is not None and status not in (204, 304):
            self.h.send_header("Content-Type", ctype)
        if status in (204, 304) or self.method == "HEAD":
            self.h.send_header("Content-Length", "0" if status in (204, 304) else str(len(body)))
            self.h.end_headers()
            return
        if f is not None and f["kind"] == "truncate":
            self.h.send_header("Content-Length", str(len(body) + 1024))
            self.h.end_headers()
            self.h.wfile.write(body[:len(body) // 2])
            self.h.wfile.flush()
            self.h.close_connection = True
            try:
                self.h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.h.send_header("Content-Length", str(len(body)))
        self.h.end_headers()
        self.h.wfile.write(body)
        self.h.wfile.flush()

    def send_json(self, status, obj, headers=None):
        self.send(status, json_bytes(obj), "application/json", headers)

    def send_error(self, status, message, headers=None):
        body, ctype = self.provider.error_body(status, message)
        self.fault = None
        self.send(status, body, ctype, headers)

    def stream(self, status=200, ctype="application/octet-stream", headers=None,
               framing="lines"):
        self._head(status, headers)
        self.h.send_header("Content-Type", ctype)
        self.h.send_header("Transfer-Encoding", "chunked")
        self.h.end_headers()
        self.h.wfile.flush()
        return Stream(self, framing)

    def websocket(self, protocol=None):
        if "websocket" not in (self.headers.get("Upgrade") or "").lower() or \
                not self.headers.get("Sec-WebSocket-Key"):
            raise HTTPError(400, "not a WebSocket upgrade request")
        accept = base64.b64encode(hashlib.sha1(
            (self.headers["Sec-WebSocket-Key"].strip() + WebSocket.GUID).encode()).digest())
        self.fault = None
        self._head(101, {"Upgrade": "websocket", "Connection": "Upgrade",
                         "Sec-WebSocket-Accept": accept.decode()})
        if protocol:
            self.h.send_header("Sec-WebSocket-Protocol", protocol)
        self.h.end_headers()
        self.h.wfile.flush()
        self.h.close_connection = True
        self.h._body_read = True
        return WebSocket(self.h)


class WebSocket:
    """The server's side of an upgraded connection (Request.websocket)."""
    GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    MAX_MESSAGE = 16 << 20

    def __init__(self, handler):
        self.h = handler
        self.wlock = threading.Lock()
        self.close_sent = False
        self.gone = False
        self.pongs = []                      # the payloads of the pongs received
        self.last_in = time.monotonic()      # when the client last sent a frame

    def _read(self, n):
        b = self.h.rfile.read(n) if n else b""
        if len(b) < n:
            raise EOFError("connection closed")
        return b

    def _frame(self):
        b1, b2 = self._read(2)
        n = b2 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        if n > self.MAX_MESSAGE:
            raise ValueError("frame of %d bytes" % n)
        mask = self._read(4) if b2 & 0x80 else None
        data = self._read(n)
        if mask:
            m = (mask * (n // 4 + 1))[:n]
            data = (int.from_bytes(data, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")
        return b1 & 0x80, b1 & 0x0F, data

    def recv(self):
        """(opcode, payload) of the next message; None when the connection ended."""
        msg, op = b"", None
        try:
            while True:
                fin, opcode, data = self._frame()
                self.last_in = time.monotonic()
                if opcode == 9:
                    self._send(10, data)
                    continue
                if opcode == 10:
                    self.pongs.append(data)
                    continue
                if opcode == 8:
                    self.close(struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1000)
                    return 8, data
                if opcode != 0:
                    op, msg = opcode, data
                else:
                    msg += data
                if len(msg) > self.MAX_MESSAGE:
                    raise ValueError("message over %d bytes" % self.MAX_MESSAGE)
                if fin and op is not None:
                    return op, msg
        except (OSError, EOFError, ValueError, ClientGone):
            self.gone = True
            return None

    def _send(self, opcode, data):
        n = len(data)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + struct.pack("!H", n)
        else:
            head += bytes([127]) + struct.pack("!Q", n)
        with self.wlock:
            if self.gone or (self.close_sent and opcode != 8):
                raise ClientGone("the WebSocket is closed")
            try:
                self.h.wfile.write(head + data)
                self.h.wfile.flush()
            except (OSError, ValueError) as e:
                self.gone = True
                raise ClientGone(str(e))

    def send_binary(self, data):
        self._send(2, bytes(data))

    def ping(self, data=b""):
        self._send(9, bytes(data))

    def send_text(self, text):
        self._send(1, text.encode())

    def close(self, code=1000):
        if self.close_sent:
            return
        try:
            self._send(8, struct.pack("!H", code))
        except ClientGone:
            pass
        self.close_sent = True

    def abort(self):
        self.gone = True
        try:
            self.h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Provider:
    """Base of a fake; see the module docstring."""
    name = "fake"
    invalid_json_body = b'{"id": '
    fault_kinds = ()

    def __init__(self, args, sbx, server):
        self.args, self.sbx, self.server = args, sbx, server

    @classmethod
    def add_arguments(cls, parser):
        pass

    def error_body(self, status, message):
        return json_bytes({"code": status, "message": message}), "application/json"

    def handle(self, req):
        raise HTTPError(404, "no route for %s %s" % (req.method, req.path))

    def state(self):
        return {}

    def close(self):
        pass

    def control(self, req):
        raise HTTPError(404, "no control route %s %s" % (req.method, req.path))


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sbx-fake"

    def version_string(self):
        return self.server_version

    def log_message(self, fmt, *args):
        if self.server.fake.verbose:
            sys.stderr.write("%s %s\n" % (self.server.fake.provider.name, fmt % args))
            sys.stderr.flush()

    def handle(self):
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.settimeout(30)
                self.connection.do_handshake()
                self.connection.settimeout(None)
            except (OSError, ValueError):
                return
        try:
            super().handle()
        except (OSError, ValueError):
            pass

    def read_body(self):
        if self._body_read:
            return b""
        self._body_read = True
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            out = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ClientGone("body ended early")
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while True:  # trailers
                        t = self.rfile.readline(65537)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    return b"".join(out)
                out.append(self.rfile.read(n))
                self.rfile.readline(3)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _dispatch(self):
        self._body_read = False
        fake = self.server.fake
        req = Request(self, fake.provider)
        try:
            if req.path.startswith("/_fake/"):
                fake.control(req)
            else:
                fake.log_request(req)
                f = fake.take_fault(req)
                if f is not None and f["kind"] == "stall":
                    fake.shutting_down.wait(float(f.get("seconds", 30)))
                    if fake.shutting_down.is_set():
                        self.close_connection = True
                        return
                elif f is not None and f["kind"] == "status":
                    st = int(f.get("status", 500))
                    if "body" in f:
                        body = f["body"]
                        if not isinstance(body, (str, bytes)):
                            body = json_bytes(body)
                        ctype = "application/json"
                    else:
                        body, ctype = fake.provider.error_body(
                            st, "injected fault: status %d" % st)
                    req.send(st, body, ctype, f.get("headers"))
                    return
                elif f is not None:
                    req.fault = f
                fake.provider.handle(req)
                if not req.responded:
                    raise HTTPError(500, "the fake sent no response")
        except ClientGone:
            self.close_connection = True
        except HTTPError as e:
            if req.responded:
                self.close_connection = True
            else:
                req.send_error(e.status, e.message, e.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:
            import traceback
            traceback.print_exc()
            if req.responded:
                self.close_connection = True
            else:
                try:
                    req.send_error(500, "fake: %s: %s" % (type(e).__name__, e))
                except OSError:
                    self.close_connection = True
        finally:
            if not self._body_read and not self.close_connection:
                try:
                    self.read_body()  # keep the connection usable
                except (OSError, ValueError, ClientGone):
                    self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _dispatch


class _ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class FakeServer:
    def __init__(self, provider_cls, args):
        self.verbose = args.verbose
        self.shutting_down = threading.Event()
        self.lock = threading.Lock()
        self.faults = []
        self.requests = []
        self.tickers = []
        self.httpd = _ThreadingServer(("127.0.0.1", 0), _Handler)
        self.httpd.fake = self
        self.port = self.httpd.server_address[1]
        self.scheme = "http"
        if getattr(args, "tls_cert", None):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(args.tls_cert, args.tls_key)
            if getattr(args, "tls_client_ca", None):   # a client certificate is checked if sent
                ctx.load_verify_locations(args.tls_client_ca)
                ctx.verify_mode = ssl.CERT_OPTIONAL
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True,
                                                do_handshake_on_connect=False)
            self.scheme = "https"
        self.sbx = Sbx(args.sbx, args.sbx_home, verbose=args.verbose)
        self.provider = provider_cls(args, self.sbx, self)

    def add_ticker(self, interval, fn):
        """Calls fn() every interval seconds in a thread of its own until shutdown."""
        def loop():
            while not self.shutting_down.wait(interval):
                try:
                    fn()
                except Exception:
                    import traceback
                    traceback.print_exc()
        t = threading.Thread(target=loop, daemon=True)
        t.start()
        self.tickers.append(t)

    def log_request(self, req):
        with self.lock:
            self.requests.append({"method": req.method, "path": req.path,
                                  "query": req.query_string,
                                  "headers": {k: v for k, v in req.headers.items()}})

    def take_fault(self, req):
        with self.lock:
            for f in self.faults:
                if f["_method"] not in ("*", req.method) or not f["_re"].search(req.path):
                    continue
                if f["_left"] is not None:
                    f["_left"] -= 1
                    if f["_left"] <= 0:
                        self.faults.remove(f)
                f["_hits"] += 1
                return {k: v for k, v in f.items() if not k.startswith("_")}
        return None

    def _add_fault(self, f):
        if not isinstance(f, dict) or "match" not in f or "kind" not in f:
            raise HTTPError(400, "a fault needs match and kind")
        if f["kind"] not in ("status", "invalid_json", "truncate", "bad_frame", "stall") + \
                tuple(self.provider.fault_kinds):
            raise HTTPError(400, "unknown fault kind %r" % f["kind"])
        meth, _, rx = str(f["match"]).strip().partition(" ")
        try:
            f["_re"] = re.compile(rx.strip() or ".")
        except re.error as e:
            raise HTTPError(400, "bad regex: %s" % e)
        f["_method"] = meth.upper() if meth != "*" else "*"
        times = int(f.get("times", 1))
        f["_left"] = times if times > 0 else None
        f["_hits"] = 0
        self.faults.append(f)

    def control(self, req):
        p, m = req.path, req.method
        if p == "/_fake/faults":
            if m == "POST":
                doc = req.json()
                with self.lock:
                    for f in doc if isinstance(doc, list) else [doc]:
                        self._add_fault(dict(f))
                return req.send_json(200, {"ok": True})
            if m == "DELETE":
                with self.lock:
                    self.faults = []
                return req.send_json(200, {"ok": True})
            if m == "GET":
                with self.lock:
                    out = [{k: v for k, v in f.items() if k not in ("_re", "_method")}
                           for f in self.faults]
                return req.send_json(200, out)
        elif p == "/_fake/requests":
            if m == "GET":
                with self.lock:
                    out = list(self.requests)
                return req.send_json(200, out)
            if m == "DELETE":
                with self.lock:
                    self.requests = []
                return req.send_json(200, {"ok": True})
        elif p == "/_fake/state" and m == "GET":
            return req.send_json(200, self.provider.state())
        else:
            return self.provider.control(req)
        raise HTTPError(404, "no control route %s %s" % (m, p))

    def serve(self):
        self.httpd.serve_forever(poll_interval=0.2)

    def stop(self):
        self.shutting_down.set()
        self.httpd.shutdown()

    def cleanup(self):
        try:
            self.provider.close()
        finally:
            self.sbx.close()
            self.httpd.server_close()


def _write_port_file(path, port):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.rename(tmp, path)


def run(provider_cls, argv=None):
    """Parses the command line, serves until SIGTERM/SIGINT, cleans up, exits 0."""
    ap = argparse.ArgumentParser(description="loopback fake of the %s API" % provider_cls.name)
    ap.add_argument("--sbx", required=True, help="the sbx binary backing the sandboxes")
    ap.add_argument("--sbx-home", required=True, help="SBX_HOME for the backing sandboxes")
    ap.add_argument("--port-file", help="write the port here once listening")
    ap.add_argument("--verbose", action="store_true", help="log requests on stderr")
    ap.add_argument("--tls-cert", help="serve HTTPS with this PEM certificate (chain)")
    ap.add_argument("--tls-key", help="the PEM key of --tls-cert")
    ap.add_argument("--tls-client-ca", help="client certificates signed by this CA are "
                    "accepted (and one signed by another refused); Request.peer_cn names it")
    provider_cls.add_arguments(ap)
    args = ap.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        ap.error("--tls-cert and --tls-key go together")
    fake = FakeServer(provider_cls, args)

    def on_signal(signum, frame):
        if not fake.shutting_down.is_set():
            threading.Thread(target=fake.stop, daemon=True).start()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t = threading.Thread(target=fake.serve, daemon=True)
    t.start()
    if args.port_file:
        _write_port_file(args.port_file, fake.port)
    print("%s fake listening on %s://127.0.0.1:%d" % (provider_cls.name, fake.scheme, fake.port),
          flush=True)
    while t.is_alive():
        t.join(0.5)
    fake.cleanup()
    sys.exit(0)

# fakelib: ready
