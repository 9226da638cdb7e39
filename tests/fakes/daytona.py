#!/usr/bin/python3
"""Loopback fake of Daytona's API (control plane and toolbox), for sbx's tests.

    daytona.py --sbx PATH --sbx-home DIR --port-file FILE [--api-key KEY] [--start-delay S]
               [--proxy-domain DOMAIN] [--class CLASS] [--page-size N] [--verbose]

Prints "daytona fake listening on http://127.0.0.1:PORT" once ready; point DAYTONA_API_URL
at that (an "/api" prefix is accepted too). Every request needs "Authorization: Bearer KEY"
(default dtn_test_key), else 401. Follows shared/provider-specs/daytona (api/openapi.yaml,
toolbox/swagger.yaml, v0.190.0) and what @daytonaio/sdk 0.190.1 sends. Each Daytona sandbox
is backed by a real local sbx sandbox in --sbx-home.

Control plane (errors: NestJS {path, timestamp, statusCode, error, message}):
    POST   /sandbox                          200 Sandbox, state "creating"; "started" after
                                             --start-delay (the backing sandbox is made in
                                             the background); 409 when the name is taken
    GET    /sandbox                          {items: [SandboxListItem], nextCursor}: cursor
                                             paging, at most min(limit, --page-size) items;
                                             filters id, name (prefixes), labels (JSON),
                                             states, sandboxClasses; sort, order
    GET    /sandbox/paginated                deprecated: {items, total, page, totalPages}
    GET    /sandbox/{idOrName}               Sandbox; 404 once deleted
    DELETE /sandbox/{idOrName}               200 Sandbox (state "destroying"); the backing
                                             sandbox is removed before the answer
    POST   /sandbox/{idOrName}/start         stopped, archived ("starting"/"restoring") or
                                             paused ("resuming") -> "started"
    POST   /sandbox/{idOrName}/stop          "stopping" -> "stopped": sbx pause --release
                                             (processes end, files stay; sessions are lost);
                                             autoDeleteInterval 0 (the SDK's ephemeral):
                                             deleted once stopped
    POST   /sandbox/{idOrName}/pause         422 unless the class is linux-vm or windows
                                             (--class; the create request has no such
                                             field), 400 unless started; "pausing" ->
                                             "paused": sbx pause (frozen, memory kept)
    POST   /sandbox/{idOrName}/archive       stopped -> "archiving" -> "archived"
    GET    /sandbox/{idOrName}/ports/{port}/preview-url
                                             {sandboxId, url https://PORT-ID.DOMAIN, token}
    GET    /sandbox/{idOrName}/ports/{port}/signed-preview-url?expiresInSeconds=
    GET    /sandbox/{id}/toolbox-proxy-url   {url}
    PUT    /sandbox/{idOrName}/labels        {labels}
    POST   /sandbox/{idOrName}/autostop|autoarchive|autodelete/{interval}, POST
           /sandbox/{id}/last-activity
Every transition takes at least --start-delay seconds (default 0.5), so clients poll.

Toolbox, at toolboxProxyUrl = http://127.0.0.1:PORT/toolbox, i.e. /toolbox/{id}/PATH (also
the deprecated /toolbox/{id}/toolbox/PATH); errors: {statusCode, message, code, timestamp,
path, method}; 400 "not started" unless the sandbox is started:
    POST   /process/execute                  {command, cwd?, envs?, timeout?} ->
                                             {exitCode, result}: sh -c COMMAND, stdout and
                                             stderr combined; 408 when timeout (s) passes
    POST   /process/session                  {sessionId} -> 201; 409 when it exists
    GET    /process/session[/{sid}]          sessions and their commands
    POST   /process/session/{sid}/exec       {command, runAsync?|async?} -> 200 {cmdId,
                                             output, stdout, stderr, exitCode}; async: 202
                                             {cmdId}
    GET    /process/session/{sid}/command/{cid}[/logs]
    DELETE /process/session/{sid}            204
    POST   /files/upload?path=  (multipart "file"), POST /files/bulk-upload (parts
           files[i].path, files[i].file), GET /files/download?path=, POST
           /files/bulk-download {paths} (multipart answer: "file" parts, JSON "error"
           parts), GET /files?path=, GET /files/info?path=, POST /files/folder?path=&mode=,
           POST /files/permissions?path=&mode=, DELETE /files?path=&recursive=,
           POST /files/move?source=&destination=
    GET    /user-home-dir, /work-dir, /version
A session is one long-lived sh in the backing sandbox that runs its commands in turn, in
the shell itself as Daytona's daemon does: cd and variables carry over to the next
command, and `exit` ends the session (the exec answers 400 "session cancelled"). Output is
kept line by line, as the daemon's labelers do: a last line without a newline gets one.
Relative file paths are taken from the working directory (/workspace).

GET /_fake/state: {"sandboxes": [...]} with each sandbox's backing sbx id and sessions.
"""
import base64
import json
import os
import re
import secrets
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakelib  # noqa: E402

ORG_ID = "00000000-0000-4000-8000-00000000f4ce"
WORKDIR = "/workspace"
STATES_STABLE = ("started", "stopped", "paused", "archived", "error")
REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict",
           413: "Payload Too Large", 422: "Unprocessable Entity", 429: "Too Many Requests",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
           504: "Gateway Timeout"}
CODES = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND",
         408: "REQUEST_TIMEOUT", 409: "CONFLICT", 422: "UNPROCESSABLE_ENTITY",
         500: "INTERNAL_SERVER_ERROR"}

_current = threading.local()   # the request this thread answers, for error bodies


def iso(t=None):
    """JavaScript's toISOString(): 2026-01-02T03:04:05.678Z."""
    if t is None:
        t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


def go_time(t):
    """Go's time.Time.String() in UTC: 2026-01-02 03:04:05.678901234 +0000 UTC."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + \
        ".%09d +0000 UTC" % int((t % 1) * 1e9)


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"



def command_body(req, missing, empty):
    """A toolbox request's JSON body with its "command"; 400 with the daemon's words if not."""
    body = req.json()
    if not isinstance(body, dict) or not isinstance(body.get("command"), str):
        raise fakelib.HTTPError(400, missing)
    if not body["command"].strip():
        raise fakelib.HTTPError(400, empty)
    return body

class Cmd:
    """One command of a session."""

    def __init__(self, cid, command):
        self.id, self.command = cid, command
        self.exit_code = None
        self.lines = []                         # (stream, bytes), in arrival order
        self.partial = {"stdout": b"", "stderr": b""}
        self.ended = {"stdout": False, "stderr": False}
        self.cancelled = False
        self.done = threading.Event()

    def add(self, stream, data):
        p = self.partial[stream] + data
        while True:
            i = p.find(b"\n")
            if i < 0:
                break
            self.lines.append((stream, p[:i + 1]))
            p = p[i + 1:]
        self.partial[stream] = p

    def end(self, stream):
        if self.partial[stream]:
            self.lines.append((stream, self.partial[stream] + b"\n"))
            self.partial[stream] = b""
        self.ended[stream] = True

    def text(self, stream=None):
        return b"".join(d for s, d in self.lines if stream in (None, s)).decode("utf-8",
                                                                                "replace")

    def record(self):
        r = {"id": self.id, "command": self.command}
        if self.exit_code is not None:
            r["exitCode"] = self.exit_code
        return r

    def logs(self):
        return {"output": self.text(), "stdout": self.text("stdout"),
                "stderr": self.text("stderr")}


class Session:
    """A long-lived sh in the backing sandbox; commands go to its stdin, one after another.
    Each command is followed by a marker line on stdout (with its status) and one on stderr,
    which tell where its output ends."""

    def __init__(self, sbx, backing, sid):
        self.sid = sid
        self.token = secrets.token_hex(8).encode()
        self.lock = threading.Lock()
        self.wlock = threading.Lock()
        self.cmds = {}                          # cid -> Cmd
        self.order = []                         # cids written, oldest first
        self.closed = False
        self.ex = sbx.exec(backing, ["sh"], stdin=True)
        self.bufs = {"stdout": b"", "stderr": b""}
        threading.Thread(target=self._read, daemon=True).start()

    def run(self, command):
        cid = str(uuid.uuid4())
        c = Cmd(cid, command)
        script = "{ eval %s\n} </dev/null; printf '\\036%s:%s:%%d\\n' \"$?\"; " \
                 "printf '\\036%s:%s\\n' >&2\n" % (sh_quote(command), self.token.decode(), cid,
                                                  self.token.decode(), cid)
        # one writer at a time, so the order of self.order is that of the shell's stdin; the
        # write happens outside self.lock, so that output keeps flowing while it blocks
        with self.wlock:
            with self.lock:
                if self.closed:
                    raise fakelib.HTTPError(400, "failed to write command: the session has "
                                            "ended")
                self.cmds[cid] = c
                self.order.append(cid)
            try:
                self.ex.write(script.encode())
            except (OSError, ValueError) as e:
                with self.lock:
                    if cid in self.order:
                        self.order.remove(cid)
                    c.exit_code = 1
                    c.done.set()
                raise fakelib.HTTPError(400, "failed to write command: %s" % e)
        return c

    def _current(self, stream):
        for cid in self.order:
            c = self.cmds[cid]
            if not c.ended[stream]:
                return c
        return None

    def _feed(self, stream, data):
        buf = self.bufs[stream] + data
        mark = b"\x1e" + self.token + b":"
        while buf:
            i = buf.find(mark)
            if i < 0:
                keep = fakelib.marker_prefix_len(buf, mark)
                self._give(stream, buf[:len(buf) - keep])
                buf = buf[len(buf) - keep:]
                break
            self._give(stream, buf[:i])
            j = buf.find(b"\n", i)
            if j < 0:
                buf = buf[i:]
                break
            fields = buf[i + len(mark):j].decode("utf-8", "replace").split(":")
            buf = buf[j + 1:]
            c = self.cmds.get(fields[0])
            if c is None:
                continue
            c.end(stream)
            if stream == "stdout" and len(fields) > 1:
                try:
                    c.exit_code = int(fields[1])
                except ValueError:
                    c.exit_code = -1
            if c.ended["stdout"] and c.ended["stderr"]:
                if c.id in self.order:
                    self.order.remove(c.id)
                c.done.set()
        self.bufs[stream] = buf

    def _give(self, stream, data):
        if not data:
            return
        c = self._current(stream)
        if c is not None:   # else: output of something left running in the background
            c.add(stream, data)

    def _read(self):
        for kind, val in self.ex.events():
            with self.lock:
                if kind in ("stdout", "stderr"):
                    self._feed(kind, val)
                elif kind == "end":
                    self.closed = True
                    # the shell ended (exit, a signal, a stop): what was running or waiting
                    # never finishes; the daemon marks it 1
                    for cid in list(self.order):
                        c = self.cmds[cid]
                        c.end("stdout")
                        c.end("stderr")
                        c.exit_code = 1
                        c.cancelled = True
                        c.done.set()
                    self.order = []

    def record(self):
        with self.lock:
            return {"sessionId": self.sid, "commands": [c.record() for c in self.cmds.values()]}

    def close(self):
        with self.lock:
            self.closed = True
        self.ex.terminate()     # first: a writer blocked on the shell's stdin gets EPIPE
        try:
            self.ex.close_stdin()
        except OSError:
            pass


class Box:
    """One Daytona sandbox."""

    def __init__(self, seq, body, fake):
        now = time.time()
        self.seq = seq
        self.id = str(uuid.uuid4())
        self.name = body.get("name") or self.id
        self.snapshot = body.get("snapshot") or "daytonaio/sandbox:0.4.3"
        self.user = body.get("user") or "daytona"
        self.env = {str(k): str(v) for k, v in (body.get("env") or {}).items()}
        self.labels = {str(k): str(v) for k, v in (body.get("labels") or {}).items()}
        self.public = bool(body.get("public", False))
        self.network_block_all = bool(body.get("networkBlockAll", False))
        self.network_allow_list = body.get("networkAllowList")
        self.domain_allow_list = body.get("domainAllowList")
        self.target = body.get("target") or "us"
        self.cpu = body.get("cpu") or 1
        self.gpu = body.get("gpu") or 0
        self.memory = body.get("memory") or 1
        self.disk = body.get("disk") or 3
        self.auto_stop = body.get("autoStopInterval", 15)
        self.auto_archive = body.get("autoArchiveInterval", 10080)
        self.auto_delete = body.get("autoDeleteInterval", -1)
        self.volumes = body.get("volumes") or []
        self.sandbox_class = fake.args.sandbox_class
        self.state, self.desired = "creating", "started"
        self.error_reason = None
        self.created = self.updated = self.activity = now
        self.preview_token = secrets.token_urlsafe(18)
        self.backing = None
        self.deleted = False
        self.busy = True                        # a transition thread is at work
        self.sessions = {}
        self.home = None
        self.toolbox_url = "http://127.0.0.1:%d/toolbox" % fake.server.port

    def list_item(self):
        r = {"id": self.id, "organizationId": ORG_ID, "name": self.name,
             "target": self.target, "runnerId": "runner-sbx-fake",
             "sandboxClass": self.sandbox_class, "state": self.state,
             "desiredState": self.desired, "snapshot": self.snapshot, "user": self.user,
             "recoverable": False, "public": self.public, "cpu": self.cpu, "gpu": self.gpu,
             "memory": self.memory, "disk": self.disk, "labels": dict(self.labels),
             "backupState": "None", "autoStopInterval": self.auto_stop,
             "autoArchiveInterval": self.auto_archive, "autoDeleteInterval": self.auto_delete,
             "createdAt": iso(self.created), "updatedAt": iso(self.updated),
             "lastActivityAt": iso(self.activity), "daemonVersion": "0.190.0",
             "toolboxProxyUrl": self.toolbox_url}
        if self.error_reason:
            r["errorReason"] = self.error_reason
        return r

    def full(self):
        r = self.list_item()
        r.update({"env": dict(self.env), "networkBlockAll": self.network_block_all,
                  "volumes": list(self.volumes)})
        if self.network_allow_list is not None:
            r["networkAllowList"] = self.network_allow_list
        if self.domain_allow_list is not None:
            r["domainAllowList"] = self.domain_allow_list
        return r


def _go_mode(e):
    kind = {"dir": "d", "symlink": "L"}.get(e["type"], "-")
    return kind + e["permissions"][1:]


def file_info(e):
    return {"name": e["name"], "isDir": e["type"] == "dir", "size": e["size"],
            "mode": _go_mode(e), "permissions": "%04o" % (e["perm"] & 0o777),
            "owner": e["owner"], "group": e["group"], "modTime": go_time(e["mtime"]),
            "modifiedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(e["mtime"]))}


class Daytona(fakelib.Provider):
    name = "daytona"
    invalid_json_body = b'{"id": "'

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--api-key", default="dtn_test_key",
                            help="the key every request must carry as a Bearer token")
        parser.add_argument("--start-delay", type=float, default=0.5,
                            help="the least seconds a transition (create, start, stop, "
                                 "pause) takes")
        parser.add_argument("--proxy-domain", default="daytona.test",
                            help="the domain of preview URLs")
        parser.add_argument("--class", dest="sandbox_class", default="container",
                            choices=("container", "linux-vm", "windows", "android"),
                            help="the sandboxClass of every sandbox (only linux-vm and "
                                 "windows can pause)")
        parser.add_argument("--page-size", type=int, default=2,
                            help="the most items one list page holds, whatever the limit")

    def __init__(self, args, sbx, server):
        super().__init__(args, sbx, server)
        self.lock = threading.RLock()
        self.boxes = {}                         # id -> Box
        self.seq = 0
        orig = server.log_request

        def log_request(req):                   # error bodies need the request's path
            _current.req = req
            orig(req)
        server.log_request = log_request

    # --- errors ---------------------------------------------------------------------------
    def error_body(self, status, message):
        req = getattr(_current, "req", None)
        path = req.path if req is not None else "/"
        if path.startswith("/api/"):
            path = path[4:]
        if path.startswith("/toolbox/"):
            return fakelib.json_bytes({
                "statusCode": status, "message": message,
                "code": CODES.get(status, REASONS.get(status, "ERROR").upper().replace(" ", "_")),
                "timestamp": iso(), "path": req.path if req else path,
                "method": req.method if req else "GET"}), "application/json; charset=utf-8"
        url = req.path + ("?" + req.query_string if req and req.query_string else "") \
            if req else path
        return fakelib.json_bytes({"path": url, "timestamp": iso(), "statusCode": status,
                                   "error": REASONS.get(status, "Error"),
                                   "message": message}), "application/json; charset=utf-8"

    # --- routing --------------------------------------------------------------------------
    def handle(self, req):
        _current.req = req
        path = req.path
        if path == "/api" or path.startswith("/api/"):
            path = path[4:] or "/"
        if req.headers.get("Authorization") != "Bearer " + self.args.api_key:
            raise fakelib.HTTPError(401, "Unauthorized")
        m = re.match(r"^/toolbox/([^/]+)(/.*)?$", path)
        if m:
            sub = m.group(2) or "/"
            if sub.startswith("/toolbox/"):     # the deprecated {api}/toolbox/{id}/toolbox/…
                sub = sub[8:]
            return self.toolbox(req, m.group(1), sub)
        return self.control(req, path)

    def control(self, req, path):
        meth = req.method
        if path == "/sandbox":
            if meth == "POST":
                return self.create(req)
            if meth == "GET":
                return self.list(req)
        if path == "/sandbox/paginated" and meth == "GET":
            return self.list_paginated(req)
        m = re.match(r"^/sandbox/([^/]+)(?:/(.*))?$", path)
        if m:
            box = self.find(m.group(1))
            rest = m.group(2) or ""
            if rest == "":
                if meth == "GET":
                    with self.lock:
                        out = box.full()
                    return req.send_json(200, out)
                if meth == "DELETE":
                    return self.delete(req, box)
            elif meth == "POST" and rest == "start":
                return self.start(req, box)
            elif meth == "POST" and rest == "stop":
                return self.stop(req, box)
            elif meth == "POST" and rest == "pause":
                return self.pause(req, box)
            elif meth == "POST" and rest == "archive":
                return self.archive(req, box)
            elif meth == "GET" and rest == "toolbox-proxy-url":
                return req.send_json(200, {"url": box.toolbox_url})
            elif meth == "PUT" and rest == "labels":
                return self.set_labels(req, box)
            elif meth == "POST" and rest == "last-activity":
                with self.lock:
                    box.activity = time.time()
                return req.send(201)
            else:
                pm = re.match(r"^ports/([^/]+)/(preview-url|signed-preview-url)$", rest)
                if pm and meth == "GET":
                    return self.preview(req, box, pm.group(1), pm.group(2))
                am = re.match(r"^(autostop|autoarchive|autodelete)/(-?\d+)$", rest)
                if am and meth == "POST":
                    with self.lock:
                        attr = {"autostop": "auto_stop", "autoarchive": "auto_archive",
                                "autodelete": "auto_delete"}[am.group(1)]
                        setattr(box, attr, int(am.group(2)))
                        box.updated = time.time()
                        return req.send_json(200, box.full())
        raise fakelib.HTTPError(404, "Cannot %s %s" % (meth, req.path))

    def find(self, id_or_name):
        with self.lock:
            box = self.boxes.get(id_or_name)
            if box is None:
                for b in self.boxes.values():
                    if b.name == id_or_name:
                        return b
                raise fakelib.HTTPError(404, "Sandbox with ID or name %s not found" %
                                        id_or_name)
            return box

    # --- transitions ----------------------------------------------------------------------
    def _transition(self, box, action, final):
        """Runs action() in the background, then sets box.state to final (at least
        --start-delay after now); "error" with the reason if action fails."""
        t0 = time.monotonic()
        box.busy = True

        def work():
            err = None
            try:
                action()
            except Exception as e:  # the sandbox shows it, as Daytona's do
                err = str(e) or type(e).__name__
            left = self.args.start_delay - (time.monotonic() - t0)
            if left > 0:
                self.server.shutting_down.wait(left)
            with self.lock:
                box.busy = False
                if box.deleted:
                    return
                box.updated = time.time()
                if err is not None:
                    box.state, box.error_reason = "error", err
                else:
                    box.state, box.error_reason = final, None
        threading.Thread(target=work, daemon=True).start()

    def _check_idle(self, box):
        if box.busy or box.state not in STATES_STABLE:
            raise fakelib.HTTPError(409, "Sandbox %s is in state %s: a state change is in "
                                    "progress" % (box.id, box.state))

    def create(self, req):
        body = req.json()
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise fakelib.HTTPError(400, "the request body must be a JSON object")
        for k in ("env", "labels"):
            if k in body and body[k] is not None and not isinstance(body[k], dict):
                raise fakelib.HTTPError(400, "%s must be an object" % k)
        with self.lock:
            if body.get("name") and any(b.name == body["name"] for b in self.boxes.values()):
                raise fakelib.HTTPError(409, "Sandbox with name %s already exists" %
                                        body["name"])
            self.seq += 1
            box = Box(self.seq, body, self)
            self.boxes[box.id] = box

            def make():
                bid = self.sbx.create(env=box.env)
                with self.lock:
                    if not box.deleted:
                        box.backing = bid
                        return
                self.sbx.rm(bid)
            self._transition(box, make, "started")
            return req.send_json(200, box.full())

    def delete(self, req, box):
        with self.lock:
            box.deleted = True
            self.boxes.pop(box.id, None)
            box.state, box.desired = "destroying", "destroyed"
            box.updated = time.time()
            out = box.full()
            sessions, box.sessions = list(box.sessions.values()), {}
            bid = box.backing
        try:
            if bid is not None:
                self.sbx.rm(bid)
        except fakelib.SbxError as e:
            raise fakelib.HTTPError(500, "removing the sandbox failed: %s" % e)
        finally:
            for s in sessions:     # their shells ended with the sandbox
                if s is not None:
                    s.close()
        return req.send_json(200, out)

    def start(self, req, box):
        with self.lock:
            if box.state == "started" and not box.busy:
                return req.send_json(200, box.full())
            self._check_idle(box)
            if box.state not in ("stopped", "archived", "paused"):
                raise fakelib.HTTPError(400, "Sandbox %s cannot be started from state %s" %
                                        (box.id, box.state))
            box.state = {"stopped": "starting", "archived": "restoring",
                         "paused": "resuming"}[box.state]
            box.desired = "started"
            box.updated = time.time()
            bid = box.backing
            self._transition(box, lambda: self.sbx.resume(bid), "started")
            return req.send_json(200, box.full())

    def stop(self, req, box):
        force = (req.arg("force") or "").lower() == "true"
        with self.lock:
            if box.state == "stopped" and not box.busy:
                return req.send_json(200, box.full())
            self._check_idle(box)
            if box.state not in ("started", "paused"):
                raise fakelib.HTTPError(400, "Sandbox %s cannot be stopped from state %s" %
                                        (box.id, box.state))
            box.state, box.desired = "stopping", "stopped"
            box.updated = time.time()
            bid = box.backing
            sessions, box.sessions = list(box.sessions.values()), {}

            def release():
                r = self.sbx.cmd(["pause", "--release", "--grace", "0s" if force else "2s",
                                  bid])
                for s in sessions:     # their shells ended with the release
                    if s is not None:
                        s.close()
                if r.returncode != 0:
                    raise fakelib.SbxError(r.stderr.decode("utf-8", "replace").strip())
                if box.auto_delete == 0:        # "0 means delete immediately upon stopping"
                    with self.lock:
                        box.deleted = True
                        self.boxes.pop(box.id, None)
                    self.sbx.rm(bid)
            self._transition(box, release, "stopped")
            return req.send_json(200, box.full())

    def pause(self, req, box):
        with self.lock:
            if box.sandbox_class not in ("linux-vm", "windows"):
                raise fakelib.HTTPError(422, "Pause is only supported for linux-vm and "
                                        "windows sandboxes, not %s" % box.sandbox_class)
            if box.busy or box.state != "started":
                raise fakelib.HTTPError(400, "Sandbox %s is not started (state %s)" %
                                        (box.id, box.state))
            box.state, box.desired = "pausing", "paused"
            box.updated = time.time()
            bid = box.backing
            self._transition(box, lambda: self.sbx.pause(bid), "paused")
            return req.send_json(200, box.full())

    def archive(self, req, box):
        with self.lock:
            if box.state == "archived" and not box.busy:
                return req.send_json(200, box.full())
            if box.busy or box.state != "stopped":
                raise fakelib.HTTPError(400, "Sandbox %s is not stopped (state %s)" %
                                        (box.id, box.state))
            box.state, box.desired = "archiving", "archived"
            box.updated = time.time()
            self._transition(box, lambda: None, "archived")
            return req.send_json(200, box.full())

    def set_labels(self, req, box):
        body = req.json()
        if not isinstance(body, dict) or not isinstance(body.get("labels"), dict):
            raise fakelib.HTTPError(400, "labels must be an object")
        with self.lock:
            box.labels = {str(k): str(v) for k, v in body["labels"].items()}
            box.updated = time.time()
            return req.send_json(200, {"labels": dict(box.labels)})

    def preview(self, req, box, port, kind):
        try:
            p = int(port)
        except ValueError:
            p = 0
        if not 1 <= p <= 65535:
            raise fakelib.HTTPError(400, "Invalid port %s" % port)
        dom = self.args.proxy_domain
        if kind == "preview-url":
            return req.send_json(200, {"sandboxId": box.id,
                                       "url": "https://%d-%s.%s" % (p, box.id, dom),
                                       "token": box.preview_token})
        exp = req.arg("expiresInSeconds") or "60"
        if not exp.isdigit() or not 1 <= int(exp) <= 86400:
            raise fakelib.HTTPError(400, "expiresInSeconds must be between 1 and 86400")
        token = fakelib.new_id(32)
        return req.send_json(200, {"sandboxId": box.id, "port": p, "token": token,
                                   "url": "https://%d-%s.%s" % (p, token, dom)})

    # --- lists ----------------------------------------------------------------------------
    def _listed(self, req):
        q = req.query
        boxes = list(self.boxes.values())
        if req.arg("id"):
            boxes = [b for b in boxes if b.id.lower().startswith(req.arg("id").lower())]
        if req.arg("name"):
            boxes = [b for b in boxes if b.name.lower().startswith(req.arg("name").lower())]
        if req.arg("labels"):
            try:
                want = json.loads(req.arg("labels"))
                assert isinstance(want, dict)
            except (ValueError, AssertionError):
                raise fakelib.HTTPError(400, "labels must be a JSON object")
            boxes = [b for b in boxes
                     if all(b.labels.get(k) == str(v) for k, v in want.items())]
        for key, attr in (("states", "state"), ("sandboxClasses", "sandbox_class")):
            vals = [v for item in q.get(key, []) + q.get(key + "[]", [])
                    for v in item.split(",") if v]
            if vals:
                boxes = [b for b in boxes if getattr(b, attr) in vals]
        return boxes

    def _limit(self, req):
        raw = req.arg("limit") or "100"
        try:
            limit = int(float(raw))
        except ValueError:
            raise fakelib.HTTPError(400, "limit must be a number")
        if not 1 <= limit <= 200:
            raise fakelib.HTTPError(400, "limit must be between 1 and 200")
        return min(limit, max(1, self.args.page_size))

    def list(self, req):
        sort = req.arg("sort") or "createdAt"
        order = (req.arg("order") or "desc").lower()
        fields = {"createdAt": lambda b: b.created, "lastActivityAt": lambda b: b.activity,
                  "name": lambda b: b.name, "cpu": lambda b: b.cpu,
                  "memoryGib": lambda b: b.memory, "diskGib": lambda b: b.disk}
        if sort not in fields or order not in ("asc", "desc"):
            raise fakelib.HTTPError(400, "sort must be one of %s, order asc or desc" %
                                    ", ".join(fields))
        limit = self._limit(req)
        with self.lock:
            boxes = self._listed(req)
            keyf = fields[sort]
            items = sorted(((keyf(b), b.seq, b) for b in boxes), key=lambda t: t[:2],
                           reverse=order == "desc")
            cur = req.arg("cursor")
            if cur:
                try:
                    after = tuple(json.loads(base64.urlsafe_b64decode(
                        cur + "=" * (-len(cur) % 4))))
                    assert len(after) == 2
                except (ValueError, AssertionError, TypeError):
                    raise fakelib.HTTPError(400, "Invalid cursor")
                if order == "desc":
                    items = [t for t in items if t[:2] < after]
                else:
                    items = [t for t in items if t[:2] > after]
            page = items[:limit]
            nxt = None
            if len(items) > limit:
                last = page[-1]
                nxt = base64.urlsafe_b64encode(
                    json.dumps([last[0], last[1]]).encode()).decode().rstrip("=")
            return req.send_json(200, {"items": [t[2].list_item() for t in page],
                                       "nextCursor": nxt})

    def list_paginated(self, req):
        try:
            page = int(float(req.arg("page") or "1"))
        except ValueError:
            raise fakelib.HTTPError(400, "page must be a number")
        if page < 1:
            raise fakelib.HTTPError(400, "page must not be less than 1")
        limit = self._limit(req)
        with self.lock:
            boxes = sorted(self._listed(req), key=lambda b: (b.created, b.seq), reverse=True)
            total = len(boxes)
            chunk = boxes[(page - 1) * limit:page * limit]
            return req.send_json(200, {"items": [b.full() for b in chunk], "total": total,
                                       "page": page,
                                       "totalPages": (total + limit - 1) // limit})

    # --- toolbox --------------------------------------------------------------------------
    def toolbox(self, req, sid, sub):
        with self.lock:
            box = self.boxes.get(sid)
            if box is None:
                raise fakelib.HTTPError(404, "sandbox %s not found" % sid)
            if box.busy or box.state != "started":
                raise fakelib.HTTPError(400, "Sandbox %s is not started (state %s)" %
                                        (box.id, box.state))
            box.activity = time.time()
            bid = box.backing
        meth = req.method
        if sub == "/process/execute" and meth == "POST":
            return self.execute(req, bid)
        if sub.startswith("/process/session"):
            return self.session_route(req, box, bid, sub[len("/process/session"):])
        if sub.startswith("/files"):
            return self.files(req, box, bid, sub[len("/files"):])
        if sub == "/user-home-dir" and meth == "GET":
            return req.send_json(200, {"dir": self.home_of(box)})
        if sub in ("/work-dir", "/project-dir") and meth == "GET":
            return req.send_json(200, {"dir": WORKDIR})
        if sub == "/version" and meth == "GET":
            return req.send_json(200, {"version": "0.190.0"})
        raise fakelib.HTTPError(404, "no toolbox route %s %s" % (meth, sub))

    def home_of(self, box):
        if box.home is None:
            r = self.sbx.run(box.backing, ["sh", "-c", 'printf %s "$HOME"'], timeout=30)
            box.home = r.stdout.decode("utf-8", "replace") or "/root"
        return box.home

    def execute(self, req, bid):
        body = command_body(req, "command is required", "empty command")
        envs = body.get("envs") or {}
        if not isinstance(envs, dict):
            raise fakelib.HTTPError(400, "envs must be an object")
        timeout = body.get("timeout")
        if timeout is not None and not isinstance(timeout, int):
            raise fakelib.HTTPError(400, "timeout must be an integer")
        # stderr joins stdout inside, so the combined result keeps the order of the writes
        ex = self.sbx.exec(bid, ["sh", "-c", "exec 2>&1\n" + body["command"]],
                           env={str(k): str(v) for k, v in envs.items()},
                           cwd=body.get("cwd") or None,
                           timeout_ms=timeout * 1000 if timeout and timeout > 0 else None)
        out = []
        end = None
        for kind, val in ex.events(keepalive=1):
            if kind in ("stdout", "stderr"):
                out.append(val)
            elif kind == "end":
                end = val
            elif self.server.shutting_down.is_set():
                ex.terminate()
        result = b"".join(out).decode("utf-8", "replace")
        if end.timed_out:
            raise fakelib.HTTPError(408, "Command execution timed out after %d seconds. The "
                                    "timeout can be increased by adjusting the timeout "
                                    "parameter in the request." % timeout)
        if end.error:
            return req.send_json(200, {"exitCode": -1, "result": end.error})
        return req.send_json(200, {"exitCode": end.exit_code(), "result": result})

    def session_route(self, req, box, bid, rest):
        meth = req.method
        if rest == "" and meth == "POST":
            body = req.json()
            sid = body.get("sessionId") if isinstance(body, dict) else None
            if not isinstance(sid, str) or not sid:
                raise fakelib.HTTPError(400, "sessionId is required")
            with self.lock:
                if sid in box.sessions or sid == "entrypoint":
                    raise fakelib.HTTPError(409, "session already exists")
                box.sessions[sid] = None        # reserved while the shell starts
            try:
                s = Session(self.sbx, bid, sid)
            except Exception:
                with self.lock:
                    box.sessions.pop(sid, None)
                raise
            with self.lock:
                box.sessions[sid] = s
            return req.send(201)
        if rest == "" and meth == "GET":
            with self.lock:
                ss = [s for s in box.sessions.values() if s is not None]
            return req.send_json(200, [s.record() for s in ss])
        if rest == "/entrypoint" and meth == "GET":
            return req.send_json(200, {"sessionId": "entrypoint", "commands": []})
        if rest == "/entrypoint/logs" and meth == "GET":
            return req.send_json(200, {"output": "", "stdout": "", "stderr": ""})
        m = re.match(r"^/([^/]+)(/.*)?$", rest)
        if not m:
            raise fakelib.HTTPError(404, "no toolbox route %s /process/session%s" %
                                    (meth, rest))
        with self.lock:
            s = box.sessions.get(m.group(1))
        if s is None:
            raise fakelib.HTTPError(404, "session not found")
        tail = m.group(2) or ""
        if tail == "" and meth == "GET":
            return req.send_json(200, s.record())
        if tail == "" and meth == "DELETE":
            with self.lock:
                box.sessions.pop(s.sid, None)
            s.close()
            return req.send(204)
        if tail == "/exec" and meth == "POST":
            return self.session_exec(req, s)
        cm = re.match(r"^/command/([^/]+)(/logs)?$", tail)
        if cm and meth == "GET":
            with s.lock:
                c = s.cmds.get(cm.group(1))
            if c is None:
                raise fakelib.HTTPError(404, "command not found")
            if not cm.group(2):
                with s.lock:
                    return req.send_json(200, c.record())
            if (req.arg("follow") or "").lower() == "true":
                raise fakelib.HTTPError(400, "follow=true needs a WebSocket, which this fake "
                                        "does not serve; poll the logs instead")
            with s.lock:
                return req.send_json(200, c.logs())
        raise fakelib.HTTPError(404, "no toolbox route %s /process/session%s" % (meth, rest))

    def session_exec(self, req, s):
        body = command_body(req, "invalid request body: command is required",
                            "command cannot be empty")
        c = s.run(body["command"])
        if body.get("runAsync") or body.get("async"):
            return req.send_json(202, {"cmdId": c.id})
        while not c.done.wait(0.5):
            if self.server.shutting_down.is_set():
                raise fakelib.HTTPError(503, "the fake is shutting down")
        if c.cancelled:
            raise fakelib.HTTPError(400, "session cancelled")
        with s.lock:
            out = dict(c.logs(), cmdId=c.id, exitCode=c.exit_code)
        return req.send_json(200, out)

    # --- files ----------------------------------------------------------------------------
    @staticmethod
    def _path(p, what="path"):
        if not p:
            raise fakelib.HTTPError(400, "%s is required" % what)
        return p if p.startswith("/") else os.path.join(WORKDIR, p)

    @staticmethod
    def _fs_error(e, path):
        if isinstance(e, FileNotFoundError):
            return fakelib.HTTPError(404, "file not found: %s" % path)
        if isinstance(e, PermissionError):
            return fakelib.HTTPError(403, "permission denied: %s" % path)
        if isinstance(e, (IsADirectoryError, NotADirectoryError, FileExistsError)):
            return fakelib.HTTPError(400, "%s: %s" % (e.strerror or e, path))
        if isinstance(e, fakelib.SbxError):
            return fakelib.HTTPError(500, str(e))
        return fakelib.HTTPError(400, "%s: %s" % (getattr(e, "strerror", None) or e, path))

    def files(self, req, box, bid, rest):
        meth = req.method
        try:
            if rest == "" and meth == "GET":
                p = self._path(req.arg("path") or WORKDIR)
                entries = self.sbx.fs(bid, "list", p, 1)
                return req.send_json(200, [file_info(e) for e in entries])
            if rest == "" and meth == "DELETE":
                p = self._path(req.arg("path"))
                e = self.sbx.fs(bid, "stat", p)
                if e["type"] == "dir" and (req.arg("recursive") or "").lower() != "true":
                    raise fakelib.HTTPError(400, "cannot delete directory without recursive "
                                            "flag")
                self.sbx.fs(bid, "remove", p)
                return req.send(204)
            if rest == "/info" and meth == "GET":
                p = self._path(req.arg("path"))
                return req.send_json(200, file_info(self.sbx.fs(bid, "stat", p)))
            if rest == "/folder" and meth == "POST":
                p = self._path(req.arg("path"))
                mode = req.arg("mode") or "0755"
                if not re.match(r"^[0-7]{1,4}$", mode):
                    raise fakelib.HTTPError(400, "invalid mode %s" % mode)
                r = self.sbx.run(bid, ["mkdir", "-p", "-m", mode, "--", p], timeout=30)
                if r.exit.exit_code() != 0:
                    raise fakelib.HTTPError(400, r.stderr.decode("utf-8", "replace").strip() or
                                            "mkdir failed")
                return req.send(201)
            if rest == "/permissions" and meth == "POST":
                p = self._path(req.arg("path"))
                mode = req.arg("mode") or ""
                if not re.match(r"^[0-7]{1,4}$", mode):
                    raise fakelib.HTTPError(400, "invalid mode %s" % mode)
                self.sbx.fs(bid, "stat", p)
                r = self.sbx.run(bid, ["chmod", mode, "--", p], timeout=30)
                if r.exit.exit_code() != 0:
                    raise fakelib.HTTPError(400, r.stderr.decode("utf-8", "replace").strip() or
                                            "chmod failed")
                return req.send(200)
            if rest == "/move" and meth == "POST":
                src = self._path(req.arg("source"), "source")
                dst = self._path(req.arg("destination"), "destination")
                self.sbx.fs(bid, "move", src, dst)
                return req.send(200)
            if rest == "/download" and meth == "GET":
                p = self._path(req.arg("path"))
                data = self.sbx.read_file(bid, p)
                name = os.path.basename(p).replace('"', "")
                return req.send(200, data, "application/octet-stream",
                                {"Content-Disposition": 'attachment; filename="%s"' % name})
            if rest == "/upload" and meth == "POST":
                p = self._path(req.arg("path"))
                parts = self._multipart(req)
                f = [x for x in parts if x.name == "file"]
                if not f:
                    raise fakelib.HTTPError(400, "the multipart part \"file\" is missing")
                self.sbx.write_file(bid, p, f[0].data)
                return req.send_json(200, {})
            if rest == "/bulk-upload" and meth == "POST":
                return self.bulk_upload(req, bid)
            if rest == "/bulk-download" and meth == "POST":
                return self.bulk_download(req, bid)
        except (OSError, fakelib.SbxError) as e:
            raise self._fs_error(e, req.arg("path") or req.arg("source") or "")
        raise fakelib.HTTPError(404, "no toolbox route %s /files%s" % (meth, rest))

    @staticmethod
    def _multipart(req):
        try:
            return fakelib.parse_multipart(req.body, req.headers.get("Content-Type"))
        except ValueError as e:
            raise fakelib.HTTPError(400, "bad multipart body: %s" % e)

    def bulk_upload(self, req, bid):
        paths, files = {}, {}
        for part in self._multipart(req):
            m = re.match(r"^files\[(\d+)\]\.(path|file)$", part.name or "")
            if not m:
                continue
            if m.group(2) == "path":
                paths[m.group(1)] = part.data.decode("utf-8", "replace")
            else:
                files[m.group(1)] = part
        if not files:
            raise fakelib.HTTPError(400, "no files[i].file parts")
        for i, part in files.items():
            p = paths.get(i) or part.filename
            if not p:
                raise fakelib.HTTPError(400, "files[%s] has no path" % i)
            try:
                self.sbx.write_file(bid, self._path(p), part.data)
            except (OSError, fakelib.SbxError) as e:
                raise self._fs_error(e, p)
        return req.send(200)

    def bulk_download(self, req, bid):
        body = req.json()
        if not isinstance(body, dict) or not isinstance(body.get("paths"), list):
            raise fakelib.HTTPError(400, "paths is required")
        boundary = "sbxfake" + secrets.token_hex(12)
        out = []
        for p in body["paths"]:
            p = str(p)
            try:
                data, name, ctype = self.sbx.read_file(bid, self._path(p)), "file", \
                    "application/octet-stream"
            except (OSError, fakelib.SbxError) as e:
                err = self._fs_error(e, p)
                data = fakelib.json_bytes({"message": err.message, "statusCode": err.status,
                                           "code": CODES.get(err.status, "ERROR")})
                name, ctype = "error", "application/json"
            fn = p.replace("\\", "\\\\").replace('"', '\\"')
            out.append(("--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                        "Content-Type: %s\r\nContent-Length: %d\r\n\r\n" %
                        (boundary, name, fn, ctype, len(data))).encode() + data + b"\r\n")
        out.append(("--%s--\r\n" % boundary).encode())
        return req.send(200, b"".join(out), "multipart/form-data; boundary=" + boundary)

    # --- fake control ---------------------------------------------------------------------
    def state(self):
        with self.lock:
            return {"sandboxes": [dict(b.full(), backing=b.backing,
                                       sessions=sorted(k for k, v in b.sessions.items() if v))
                                  for b in sorted(self.boxes.values(), key=lambda b: b.seq)]}

    def close(self):
        with self.lock:
            boxes = list(self.boxes.values())
        for b in boxes:
            for s in list(b.sessions.values()):
                if s is not None:
                    s.close()


if __name__ == "__main__":
    fakelib.run(Daytona)
