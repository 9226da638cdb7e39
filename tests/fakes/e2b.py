#!/usr/bin/python3
"""A loopback fake of E2B, both planes on one server, for sbx's tests.

Usage: e2b.py --sbx PATH --sbx-home DIR [--port-file FILE] [--api-key KEY]
              [--domain DOMAIN] [--envd-version V] [--page-size N] [--verbose]

Prints "e2b fake listening on http://127.0.0.1:PORT" once ready (and writes PORT to FILE).
Point the official SDK at it with E2B_API_URL=E2B_SANDBOX_URL=http://127.0.0.1:PORT,
E2B_API_KEY=KEY, E2B_DOMAIN=DOMAIN. Every sandbox is a real local sbx sandbox (fakelib.Sbx
with SBX_HOME=DIR), removed when the fake is killed or the sandbox times out.

Control plane (openapi.yml), X-API-Key required (401 with the Error JSON otherwise):
    POST /sandboxes, POST /v2/sandboxes (201 Sandbox; v2 sandboxes are always secured)
    GET /v2/sandboxes (state, metadata, template, startedAfter, order, limit, nextToken;
        X-Next-Token, X-Total-Running; default page size --page-size, 2: smaller than the
        real 100 so that paging gets exercised), GET /sandboxes (deprecated, running only)
    GET/DELETE /sandboxes/{id}, POST /sandboxes/{id}/pause, /connect, /v2/.../connect,
    /resume (deprecated), /timeout, /refreshes, PUT /sandboxes/{id}/network,
    GET /sandboxes/{id}/metrics, GET /sandboxes/{id}/logs, GET /v2/sandboxes/{id}/logs
envd (envd.yaml, process.proto, filesystem.proto) on the same server: a request is for
envd when it carries E2b-Sandbox-Id (and E2b-Sandbox-Port: 49983), or its Host is
49983-ID.DOMAIN, and its path is an envd one; /health without them is the control plane's.
    GET /health (204), GET /envs, GET /metrics, GET /files, POST /files (octet-stream or
    multipart), /process.Process/{Start,Connect} (Connect server streams, JSON codec),
    /process.Process/{List,SendInput,CloseStdin,SendSignal} (unary), /filesystem.Filesystem/
    {Stat,MakeDir,Move,ListDir,Remove} (unary); the rest answers unimplemented.
    A secured sandbox wants X-Access-Token (401 JSON otherwise; /files also takes the
    signature query parameters); a paused one answers 409 {"sandboxId","message":"The
    sandbox is paused","code":409,"canAutoResume":false} (autoResume on: it resumes
    first), an unknown one 502 {"sandboxId","message":"The sandbox was not found","code":502}
    as the real proxy does.
Users: "user" (uid 1000, home /home/user, the default) and "root". sbx switches users only
when it runs as root: when this fake runs unprivileged every command and file operation
runs as uid 0 inside, whatever the request says (HOME and USER still follow the request).
Control API and faults: see fakelib.py.
"""
import base64
import gzip
import hashlib
import json
import os
import posixpath
import re
import secrets
import queue
import stat as stat_mod
import sys
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ next to the sources
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakelib  # noqa: E402
from fakelib import ClientGone, HTTPError, json_bytes  # noqa: E402

ENVD_PORT = 49983
USERS = {  # name -> (uid:gid for sbx exec -u, home)
    "user": ("1000:1000", "/home/user"),
    "root": ("0:0", "/root"),
}
UID_NAMES = {0: "root", 1000: "user"}
GID_NAMES = {0: "root", 1000: "user"}

CONNECT_HTTP = {
    "canceled": 499, "unknown": 500, "invalid_argument": 400, "deadline_exceeded": 504,
    "not_found": 404, "already_exists": 409, "permission_denied": 403,
    "resource_exhausted": 429, "failed_precondition": 400, "aborted": 409,
    "out_of_range": 400, "unimplemented": 501, "internal": 500, "unavailable": 503,
    "data_loss": 500, "unauthenticated": 401,
}

ENVD_PATHS = re.compile(r"^/(health|envs|metrics|files|files/compose|init|"
                        r"process\.Process/[A-Za-z]+|filesystem\.Filesystem/[A-Za-z]+)$")
SANDBOX_ID_RE = re.compile(r"^[a-z0-9]+$")


class ConnectError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message

    def body(self):
        return {"code": self.code, "message": self.message}


def b64(data):
    return base64.b64encode(data).decode()


def go_filemode(mode):
    """Go's os.FileMode.String() of a stat st_mode: drwxr-xr-x, Lrwxrwxrwx, -rw-r--r--."""
    letters = ""
    for bit_set, ch in ((stat_mod.S_ISDIR(mode), "d"), (stat_mod.S_ISLNK(mode), "L"),
                        (stat_mod.S_ISBLK(mode) or stat_mod.S_ISCHR(mode), "D"),
                        (stat_mod.S_ISFIFO(mode), "p"), (stat_mod.S_ISSOCK(mode), "S"),
                        (mode & stat_mod.S_ISUID, "u"), (mode & stat_mod.S_ISGID, "g"),
                        (stat_mod.S_ISCHR(mode), "c"), (mode & stat_mod.S_ISVTX, "t")):
        if bit_set:
            letters += ch
    perm = "".join(c if mode & b else "-" for c, b in zip(
        "rwxrwxrwx", (0o400, 0o200, 0o100, 0o40, 0o20, 0o10, 0o4, 0o2, 0o1)))
    return (letters or "-") + perm


def proto_time(ns):
    """google.protobuf.Timestamp in proto3 JSON: 0, 3, 6 or 9 fractional digits."""
    sec, nanos = divmod(int(ns), 10**9)
    s = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    if nanos:
        if nanos % 10**6 == 0:
            s += ".%03d" % (nanos // 10**6)
        elif nanos % 1000 == 0:
            s += ".%06d" % (nanos // 1000)
        else:
            s += ".%09d" % nanos
    return s + "Z"


def entry_info(e):
    """filesystem.EntryInfo (proto3 JSON: defaults omitted, int64 as a string)."""
    types = {"file": "FILE_TYPE_FILE", "dir": "FILE_TYPE_DIRECTORY",
             "symlink": "FILE_TYPE_SYMLINK"}
    out = {"name": e["name"]}
    if e["type"] in types:
        out["type"] = types[e["type"]]
    out["path"] = e["path"]
    if e["size"]:
        out["size"] = str(e["size"])
    if e["perm"] & 0o777:
        out["mode"] = e["perm"] & 0o777
    out["permissions"] = go_filemode(e["mode"])
    out["owner"] = UID_NAMES.get(e["uid"], e["owner"])
    out["group"] = GID_NAMES.get(e["gid"], e["group"])
    out["modifiedTime"] = proto_time(e.get("mtime_ns", int(e["mtime"] * 1e9)))
    if e.get("symlink_target"):
        out["symlinkTarget"] = e["symlink_target"]
    return out


def oserror_to_connect(e, what):
    if isinstance(e, FileNotFoundError):
        return ConnectError("not_found", "%s: no such file or directory" % what)
    if isinstance(e, FileExistsError):
        return ConnectError("already_exists", "%s: file exists" % what)
    if isinstance(e, (NotADirectoryError, IsADirectoryError)):
        return ConnectError("invalid_argument", "%s: %s" % (what, e.strerror))
    if isinstance(e, PermissionError):
        return ConnectError("permission_denied", "%s: permission denied" % what)
    return ConnectError("internal", "%s: %s" % (what, getattr(e, "strerror", None) or e))


class Proc:
    """A process of a sandbox: its events fan out to every attached stream."""

    def __init__(self, box, ex, config, tag):
        self.box, self.ex, self.config, self.tag = box, ex, config, tag
        self.pid = None
        self.subs = []
        self.lock = threading.Lock()
        self.ended = False

    def subscribe(self):
        q = queue.Queue()
        with self.lock:
            if self.ended:
                return None
            self.subs.append(q)
        return q

    def unsubscribe(self, q):
        with self.lock:
            if q in self.subs:
                self.subs.remove(q)

    def pump(self):
        for ev in self.ex.events():
            if ev[0] == "start":
                self.pid = ev[1]
                with self.box.lock:
                    self.box.procs[self.pid] = self
            with self.lock:
                if ev[0] == "end":
                    self.ended = True
                for q in self.subs:
                    q.put(ev)
        with self.box.lock:
            if self.pid is not None and self.box.procs.get(self.pid) is self:
                del self.box.procs[self.pid]


class Box:
    def __init__(self, **kw):
        self.__dict__.update(kw)
        self.lock = threading.RLock()
        self.procs = {}


class E2BFake(fakelib.Provider):
    name = "e2b"
    invalid_json_body = b'{"sandboxID": '

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--api-key", default="e2b_test_key")
        parser.add_argument("--domain", default="e2b.test")
        parser.add_argument("--envd-version", default="0.5.7")
        parser.add_argument("--page-size", type=int, default=2,
                            help="default page of GET /v2/sandboxes (the real API: 100)")

    def __init__(self, args, sbx, server):
        super().__init__(args, sbx, server)
        self.boxes = {}
        self.snapshots = {}  # snapshotID -> the backing sandbox's snapshot (sbx snapshot)
        self.lock = threading.Lock()
        self.seq = 0
        server.add_ticker(0.25, self.expire)

    # --- plumbing ---------------------------------------------------------------------------

    def error_body(self, status, message):
        return json_bytes({"code": status, "message": message}), "application/json"

    def state(self):
        with self.lock:
            boxes = list(self.boxes.values())
        out = {}
        for b in boxes:
            out[b.id] = {"state": b.state, "backing": b.backing, "templateID": b.template,
                         "metadata": b.metadata, "envVars": b.env_vars, "secure": b.secure,
                         "endAt": utc(b.end_at), "timeoutLeft": round(b.end_at - time.time(), 1),
                         "autoPause": b.auto_pause, "autoResume": b.auto_resume,
                         "pausedWithMemory": b.paused_memory,
                         "processes": sorted(p for p in b.procs)}
        return out

    def close(self):
        with self.lock:
            boxes = list(self.boxes.values())
            self.boxes = {}
            snaps = list(self.snapshots.values())
            self.snapshots = {}
        for b in boxes:
            try:
                self.sbx.rm(b.backing)
            except Exception as e:
                print("e2b fake: removing %s: %s" % (b.backing, e), file=sys.stderr, flush=True)
        for local in snaps:
            r = self.sbx.cmd(["snapshot", "rm", local])
            if r.returncode != 0:
                print("e2b fake: removing snapshot %s: %s" % (local, r.stderr.decode().strip()),
                      file=sys.stderr, flush=True)

    def expire(self):
        now = time.time()
        with self.lock:
            due = [b for b in self.boxes.values() if b.state == "running" and b.end_at <= now]
        for b in due:
            with b.lock:
                if b.state != "running" or b.end_at > time.time():
                    continue
                if b.auto_pause:
                    try:
                        self.sbx.pause(b.backing, release=not b.auto_pause_memory)
                        b.state = "paused"
                        b.paused_memory = b.auto_pause_memory
                        continue
                    except fakelib.SbxError as e:
                        print("e2b fake: auto-pause %s: %s" % (b.id, e), file=sys.stderr)
                self._kill(b)

    def _kill(self, b):
        with self.lock:
            self.boxes.pop(b.id, None)
        b.state = "killed"
        try:
            self.sbx.rm(b.backing)
        except fakelib.SbxError as e:
            print("e2b fake: rm %s: %s" % (b.backing, e), file=sys.stderr, flush=True)

    def handle(self, req):
        sid, port = self._envd_target(req)
        if sid is not None and ENVD_PATHS.match(req.path):
            return self.envd(req, sid, port)
        if sid is None and req.path != "/health" and ENVD_PATHS.match(req.path):
            raise HTTPError(400, "missing header")
        return self.control(req)

    def _envd_target(self, req):
        sid = req.headers.get("E2b-Sandbox-Id")
        if sid:
            try:
                port = int(req.headers.get("E2b-Sandbox-Port") or "0")
            except ValueError:
                port = 0
            return sid, port
        host = (req.headers.get("Host") or "").split(":")[0]
        m = re.match(r"^(\d+)-([a-z0-9]+)\.", host)
        if m:
            return m.group(2), int(m.group(1))
        return None, None

    # --- control plane ----------------------------------------------------------------------

    def control(self, req):
        if req.method == "GET" and req.path == "/health":
            return req.send(200, b"Health check successful", "text/plain")
        key = req.headers.get("X-API-Key")
        if not key:
            raise HTTPError(401, "Missing API key, please provide it in the X-API-Key header")
        if key != self.args.api_key:
            raise HTTPError(401, "Invalid API key, please visit https://e2b.dev/docs to get "
                                 "your API key")
        p, m = req.path, req.method
        if p in ("/sandboxes", "/v2/sandboxes") and m == "POST":
            return self.create(req, v2=p.startswith("/v2/"))
        if p == "/v2/sandboxes" and m == "GET":
            return self.list_v2(req)
        if p == "/sandboxes" and m == "GET":
            return self.list_v1(req)
        mm = re.match(r"^(/v2)?/sandboxes/([^/]+)(?:/([a-z]+))?$", p)
        if not mm:
            raise HTTPError(404, "no such route: %s %s" % (m, p))
        v2, sid, verb = mm.group(1), urllib.parse.unquote(mm.group(2)), mm.group(3)
        routes = {
            (None, "GET", None): self.get, (None, "DELETE", None): self.delete,
            (None, "POST", "pause"): self.pause, (None, "POST", "connect"): self.connect,
            ("/v2", "POST", "connect"): self.connect, (None, "POST", "resume"): self.resume,
            (None, "POST", "timeout"): self.set_timeout, (None, "POST", "refreshes"): self.refresh,
            (None, "PUT", "network"): self.network, (None, "GET", "metrics"): self.metrics,
            (None, "GET", "logs"): self.logs, ("/v2", "GET", "logs"): self.logs,
            (None, "POST", "snapshots"): self.snapshot,
        }
        fn = routes.get((v2, m, verb))
        if fn is None:
            if verb == "fork":
                raise HTTPError(501, "%s is not supported by this fake" % verb)
            raise HTTPError(404, "no such route: %s %s" % (m, p))
        box = self.boxes.get(sid)
        if box is None:
            raise HTTPError(404, "sandbox \"%s\" doesn't exist or you don't have access to it"
                            % sid)
        return fn(req, box, v2=bool(v2))

    def _body(self, req, required=False):
        if not req.body.strip():
            if required:
                raise HTTPError(400, "request body is required")
            return {}
        doc = req.json()
        if not isinstance(doc, dict):
            raise HTTPError(400, "request body must be a JSON object")
        return doc

    def _int_field(self, doc, name, default=None, required=False, lo=0, hi=None):
        if name not in doc or doc[name] is None:
            if required:
                raise HTTPError(400, "%s is required" % name)
            return default
        v = doc[name]
        if isinstance(v, bool) or not isinstance(v, int):
            raise HTTPError(400, "%s must be an integer" % name)
        if v < lo or (hi is not None and v > hi):
            raise HTTPError(400, "%s out of range" % name)
        return v

    def create(self, req, v2):
        doc = self._body(req, required=True)
        tpl = doc.get("templateID")
        if not isinstance(tpl, str) or not tpl:
            raise HTTPError(400, "templateID is required")
        timeout = self._int_field(doc, "timeout", 15, hi=86400)
        meta = doc.get("metadata") or {}
        envs = doc.get("envVars") or {}
        for what, d in (("metadata", meta), ("envVars", envs)):
            if not isinstance(d, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in d.items()):
                raise HTTPError(400, "%s must map strings to strings" % what)
        for k in envs:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
                raise HTTPError(400, "invalid environment variable name %r" % k)
        net = doc.get("network") or {}
        if not isinstance(net, dict):
            raise HTTPError(400, "network must be an object")
        secure = True if v2 else bool(doc.get("secure", False))
        auto_resume = bool((doc.get("autoResume") or {}).get("enabled", False))
        with self.lock:
            snap = self.snapshots.get(tpl)
        try:
            backing = self.sbx.create(env=envs, args=["--from", snap] if snap else [])
        except fakelib.SbxError as e:
            raise HTTPError(500, "failed to create sandbox: %s" % e)
        # the template's user: its home, owned by it when sbx can switch users
        self.sbx._plain(backing, ["sh", "-c", "mkdir -p /home/user && "
                                  "{ chown 1000:1000 /home/user 2>/dev/null || true; }"])
        with self.lock:
            self.seq += 1
            sid = fakelib.new_id(20)
        now = time.time()
        box = Box(id=sid, backing=backing, template=tpl, alias=tpl if not
                  re.match(r"^[a-z0-9]{20}$", tpl) else None,
                  client_id="6532622b", metadata=meta, env_vars=envs, started_at=now,
                  end_at=now + timeout, state="running", secure=secure,
                  token=secrets.token_hex(16) if secure else None,
                  traffic_token=secrets.token_hex(16)
                  if net.get("allowPublicTraffic") is False else None,
                  auto_pause=bool(doc.get("autoPause", False)),
                  auto_pause_memory=doc.get("autoPauseMemory", True) is not False,
                  auto_resume=auto_resume, paused_memory=None,
                  allow_internet=doc.get("allow_internet_access"), network=net,
                  volume_mounts=doc.get("volumeMounts") or [])
        with self.lock:
            self.boxes[sid] = box
        return req.send_json(201, self._sandbox(box))

    def _sandbox(self, b):
        out = {"templateID": b.template, "sandboxID": b.id, "clientID": b.client_id,
               "envdVersion": self.args.envd_version, "domain": self.args.domain}
        if b.alias:
            out["alias"] = b.alias
        if b.token:
            out["envdAccessToken"] = b.token
        out["trafficAccessToken"] = b.traffic_token
        return out

    def _listed(self, b):
        out = {"templateID": b.template, "sandboxID": b.id, "clientID": b.client_id,
               "startedAt": utc(b.started_at), "endAt": utc(b.end_at), "cpuCount": 2,
               "memoryMB": 512, "diskSizeMB": 512, "metadata": b.metadata, "state": b.state,
               "envdVersion": self.args.envd_version, "volumeMounts": b.volume_mounts}
        if b.alias:
            out["alias"] = b.alias
        return out

    def _filtered(self, req, states):
        meta = {}
        raw = req.arg("metadata")
        if raw:
            for k, v in urllib.parse.parse_qsl(raw, keep_blank_values=True):
                meta[urllib.parse.unquote(k)] = urllib.parse.unquote(v)
        tpl = req.arg("template")
        after = req.arg("startedAfter")
        after_t = None
        if after:
            try:
                after_t = parse_time(after)
            except ValueError:
                raise HTTPError(400, "invalid startedAfter %r" % after)
        with self.lock:
            boxes = list(self.boxes.values())
        out = []
        for b in boxes:
            if b.state not in states:
                continue
            if any(b.metadata.get(k) != v for k, v in meta.items()):
                continue
            if tpl and tpl not in (b.template, b.alias):
                continue
            if after_t is not None and b.started_at < after_t:
                continue
            out.append(b)
        return out

    def list_v1(self, req):
        boxes = sorted(self._filtered(req, ("running",)), key=lambda b: b.started_at)
        return req.send_json(200, [self._listed(b) for b in boxes])

    def list_v2(self, req):
        states = set()
        for v in req.query.get("state", []):
            states.update(s for s in v.split(",") if s)
        if not states:
            states = {"running", "paused"}
        if states - {"running", "paused"}:
            raise HTTPError(400, "invalid state %s" % ",".join(sorted(states)))
        order = req.arg("order") or "desc"
        if order not in ("asc", "desc"):
            raise HTTPError(400, "invalid order %r" % order)
        limit = req.arg("limit")
        if limit is None or limit == "":
            limit = self.args.page_size
        else:
            try:
                limit = int(limit)
            except ValueError:
                raise HTTPError(400, "invalid limit %r" % limit)
            if not 1 <= limit <= 100:
                raise HTTPError(400, "limit must be between 1 and 100")
        boxes = self._filtered(req, states)
        boxes.sort(key=lambda b: (b.started_at, b.id), reverse=(order == "desc"))
        running = sum(1 for b in boxes if b.state == "running")
        token = req.arg("nextToken")
        if token:
            try:
                t, _, last = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)) \
                    .decode().partition("|")
                cursor = (float(t), last)
            except (ValueError, UnicodeDecodeError):
                raise HTTPError(400, "invalid nextToken")
            if order == "desc":
                boxes = [b for b in boxes if (b.started_at, b.id) < cursor]
            else:
                boxes = [b for b in boxes if (b.started_at, b.id) > cursor]
        page, more = boxes[:limit], len(boxes) > limit
        headers = {"X-Total-Running": str(running)}
        if more:
            last = page[-1]
            headers["X-Next-Token"] = base64.urlsafe_b64encode(
                ("%r|%s" % (last.started_at, last.id)).encode()).decode().rstrip("=")
        return req.send_json(200, [self._listed(b) for b in page], headers)

    def get(self, req, b, v2=False):
        out = self._listed(b)
        out.pop("volumeMounts", None)
        out["domain"] = self.args.domain
        if b.token:
            out["envdAccessToken"] = b.token
        if b.allow_internet is not None:
            out["allowInternetAccess"] = b.allow_internet
        net = dict(b.network)
        net.setdefault("allowPublicTraffic", b.traffic_token is None)
        out["network"] = net
        out["lifecycle"] = {"autoResume": b.auto_resume,
                            "onTimeout": "pause" if b.auto_pause else "kill"}
        out["volumeMounts"] = b.volume_mounts
        return req.send_json(200, out)

    def delete(self, req, b, v2=False):
        with b.lock:
            self._kill(b)
        return req.send(204)

    def snapshot(self, req, b, v2=False):
        # a persistent snapshot: a template new sandboxes start from (here, a snapshot of
        # the backing sandbox that creates from that template fork)
        doc = self._body(req, required=True)
        name = doc.get("name")
        if name is not None and (not isinstance(name, str) or
                                 not re.match(r"^[a-z0-9][a-z0-9._-]{0,62}$", name)):
            raise HTTPError(400, "invalid snapshot name")
        with b.lock:
            r = self.sbx.cmd(["snapshot", "create", b.backing])
            if r.returncode != 0:
                raise HTTPError(500, "failed to snapshot sandbox: %s" %
                                r.stderr.decode("utf-8", "replace").strip())
            local = r.stdout.decode().strip()
        sid = "%s:default" % (name or fakelib.new_id(20))
        with self.lock:
            self.snapshots[sid] = local
        return req.send_json(201, {"snapshotID": sid, "names": ["fake-team/" + sid]})

    def pause(self, req, b, v2=False):
        doc = self._body(req)
        memory = doc.get("memory", True) is not False
        with b.lock:
            if b.state == "paused":
                raise HTTPError(409, "Sandbox \"%s\" is already paused" % b.id)
            try:
                self.sbx.pause(b.backing, release=not memory)
            except fakelib.SbxError as e:
                raise HTTPError(500, "failed to pause sandbox: %s" % e)
            b.state = "paused"
            b.paused_memory = memory
        return req.send(204)

    def _resume(self, b, timeout):
        try:
            self.sbx.resume(b.backing)
        except fakelib.SbxError as e:
            raise HTTPError(500, "failed to resume sandbox: %s" % e)
        b.state = "running"
        b.paused_memory = None
        b.end_at = time.time() + timeout

    def connect(self, req, b, v2=False):
        doc = self._body(req, required=not v2)
        timeout = self._int_field(doc, "timeout", 300, required=not v2, hi=86400)
        with b.lock:
            if b.state == "paused":
                self._resume(b, timeout)
                return req.send_json(201, self._sandbox(b))
            b.end_at = max(b.end_at, time.time() + timeout)
            return req.send_json(200, self._sandbox(b))

    def resume(self, req, b, v2=False):
        doc = self._body(req, required=True)
        timeout = self._int_field(doc, "timeout", 15, hi=86400)
        with b.lock:
            if b.state != "paused":
                raise HTTPError(409, "Sandbox \"%s\" is already running" % b.id)
            if "autoPause" in doc:
                b.auto_pause = bool(doc["autoPause"])
            self._resume(b, timeout)
        return req.send_json(201, self._sandbox(b))

    def set_timeout(self, req, b, v2=False):
        doc = self._body(req, required=True)
        timeout = self._int_field(doc, "timeout", required=True, hi=86400)
        with b.lock:
            b.end_at = time.time() + timeout
        return req.send(204)

    def refresh(self, req, b, v2=False):
        doc = self._body(req)
        duration = self._int_field(doc, "duration", 60, hi=3600)
        with b.lock:
            b.end_at = max(b.end_at, time.time() + duration)
        return req.send(204)

    def network(self, req, b, v2=False):
        doc = self._body(req, required=True)
        with b.lock:
            if b.state != "running":
                raise HTTPError(409, "Sandbox \"%s\" is not running" % b.id)
            b.network = {k: v for k, v in doc.items() if k != "allow_internet_access"}
            if "allow_internet_access" in doc:
                b.allow_internet = doc["allow_internet_access"]
        return req.send(204)

    def metrics(self, req, b, v2=False):
        now = time.time()
        return req.send_json(200, [{
            "timestamp": utc(now), "timestampUnix": int(now), "cpuCount": 2, "cpuUsedPct": 0.5,
            "memUsed": 64 << 20, "memTotal": 512 << 20, "diskUsed": 16 << 20,
            "diskTotal": 512 << 20}])

    def logs(self, req, b, v2=False):
        return req.send_json(200, {"logs": []} if v2 else {"logs": [], "logEntries": []})

    # --- envd -------------------------------------------------------------------------------

    def envd(self, req, sid, port):
        b = self.boxes.get(sid)
        if b is None:
            return req.send_json(502, {"sandboxId": sid, "message": "The sandbox was not found",
                                       "code": 502})
        if port != ENVD_PORT:
            return req.send_json(502, {"sandboxId": sid, "message": "The sandbox is running "
                                       "but port is not open", "port": port, "code": 502})
        if b.state == "paused":
            if b.auto_resume and b.paused_memory is not False:
                with b.lock:
                    if b.state == "paused":
                        self._resume(b, max(15, int(b.end_at - time.time())))
            else:
                return req.send_json(409, {"sandboxId": sid, "message": "The sandbox is paused",
                                           "code": 409, "canAutoResume": False})
        open_path = req.method + req.path in ("GET/health", "GET/files", "POST/files")
        if b.token and not open_path and req.headers.get("X-Access-Token") != b.token:
            raise HTTPError(401, "unauthorized access, please provide a valid access token or "
                                 "method signing if supported")
        p = req.path
        if p == "/health":
            return req.send(204)
        if p == "/envs" and req.method == "GET":
            return req.send_json(200, b.env_vars)
        if p == "/metrics" and req.method == "GET":
            return req.send_json(200, {"ts": int(time.time()), "cpu_count": 2,
                                       "cpu_used_pct": 0.5, "mem_total": 512 << 20,
                                       "mem_used": 64 << 20, "disk_used": 16 << 20,
                                       "disk_total": 512 << 20})
        if p == "/files" and req.method == "GET":
            return self.files_get(req, b)
        if p == "/files" and req.method == "POST":
            return self.files_post(req, b)
        if p.startswith("/process.Process/") or p.startswith("/filesystem.Filesystem/"):
            if req.method != "POST":
                raise HTTPError(405, "method not allowed")
            return self.rpc(req, b, p[1:].split("/", 1))
        raise HTTPError(404, "not found")

    def _user(self, name):
        """(name, sbx exec -u value, home) of an envd username (None: the default)."""
        if name is None or name == "":
            name = "user"
        if name not in USERS:
            return None
        uid, home = USERS[name]
        return name, uid, home

    def _resolve(self, path, home):
        if path is None or path == "":
            return home
        if path == "~" or path.startswith("~/"):
            path = home + path[1:]
        elif not path.startswith("/"):
            path = posixpath.join(home, path)
        return posixpath.normpath(path) if path != "/" else "/"

    def _signed(self, req, b, path, operation):
        """None when the request may touch /files, else the reason it may not."""
        if not b.token:
            return None
        tok = req.headers.get("X-Access-Token")
        if tok:
            return None if tok == b.token else "access token present in header but does not match"
        sig = req.arg("signature")
        if sig is None:
            return "missing signature query parameter"
        user = req.arg("username") or ""
        exp = req.arg("signature_expiration")
        raw = "%s:%s:%s:%s" % (path, operation, user, b.token)
        if exp is not None:
            raw += ":" + exp
        want = "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("=")
        if not secrets.compare_digest(want, sig):
            return "invalid signature"
        if exp is not None:
            try:
                if int(exp) < time.time():
                    return "signature is already expired"
            except ValueError:
                return "invalid signature"
        return None

    def files_get(self, req, b):
        path = req.arg("path") or ""
        why = self._signed(req, b, path, "read")
        if why:
            raise HTTPError(401, why)
        u = self._user(req.arg("username"))
        if u is None:
            raise HTTPError(401, "error looking up user '%s': user: unknown user %s"
                            % (req.arg("username"), req.arg("username")))
        name, uid, home = u
        full = self._resolve(path, home)
        try:
            data = self.sbx.read_file(b.backing, full, user=uid)
        except FileNotFoundError:
            raise HTTPError(404, "path '%s' does not exist" % full)
        except IsADirectoryError:
            raise HTTPError(400, "path '%s' is a directory" % full)
        except (OSError, fakelib.SbxError) as e:
            raise HTTPError(500, "error opening file '%s': %s" % (full, e))
        headers = {"Vary": "Accept-Encoding"}
        if "gzip" in (req.headers.get("Accept-Encoding") or "") and not req.headers.get("Range"):
            data = gzip.compress(data)
            headers["Content-Encoding"] = "gzip"
        return req.send(200, data, "application/octet-stream", headers)

    def files_post(self, req, b):
        path = req.arg("path")
        why = self._signed(req, b, path or "", "write")
        if why:
            raise HTTPError(401, why)
        u = self._user(req.arg("username"))
        if u is None:
            raise HTTPError(401, "error looking up user '%s': user: unknown user %s"
                            % (req.arg("username"), req.arg("username")))
        name, uid, home = u
        body = req.body
        if (req.headers.get("Content-Encoding") or "").lower() == "gzip":
            try:
                body = gzip.decompress(body)
            except (OSError, EOFError) as e:
                raise HTTPError(400, "error decompressing request body: %s" % e)
        ctype = req.headers.get("Content-Type") or ""
        media = ctype.split(";")[0].strip().lower()
        files = []
        if media == "application/octet-stream":
            if path is None:
                raise HTTPError(400, "path query parameter is required for raw body upload")
            files.append((self._resolve(path, home), body))
        elif media.startswith("multipart/"):
            try:
                parts = fakelib.parse_multipart(body, ctype)
            except ValueError as e:
                raise HTTPError(500, "error parsing multipart form: %s" % e)
            seen = set()
            for part in parts:
                if part.name != "file":
                    continue
                dest = path if path is not None else part.filename
                if dest is None:
                    raise HTTPError(400, "error getting multipart custom part file name")
                full = self._resolve(dest, home)
                if full in seen:
                    raise HTTPError(400, "you cannot upload multiple files to the same path "
                                         "'%s' in one upload request" % full)
                seen.add(full)
                files.append((full, part.data))
        else:
            raise HTTPError(400, "unsupported content type: %s, expected multipart/form-data "
                                 "or application/octet-stream" % ctype)
        out = []
        for full, data in files:
            try:
                self.sbx.write_file(b.backing, full, data, user=uid)
            except IsADirectoryError:
                raise HTTPError(400, "path is a directory: %s" % full)
            except (OSError, fakelib.SbxError) as e:
                raise HTTPError(500, "error writing file '%s': %s" % (full, e))
            out.append({"path": full, "name": posixpath.basename(full), "type": "file"})
        return req.send_json(200, out)

    # --- Connect RPC ------------------------------------------------------------------------

    STREAMING = {("process.Process", "Start"), ("process.Process", "Connect"),
                 ("filesystem.Filesystem", "WatchDir")}

    def rpc(self, req, b, svc_method):
        svc, method = svc_method
        ctype = (req.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        streaming = (svc, method) in self.STREAMING
        if streaming:
            if ctype != "application/connect+json":
                return req.send(415, b"", None, {"Accept-Post": "application/connect+json"})
            try:
                env = fakelib.parse_connect_envelopes(req.body)
                if len(env) != 1 or env[0][0] & 0x01:
                    raise ValueError("want one uncompressed message")
                msg = json.loads(env[0][1] or b"{}")
            except ValueError as e:
                return self._stream_error(req, ConnectError("invalid_argument",
                                                            "unmarshal message: %s" % e))
            fn = {"Start": self.p_start, "Connect": self.p_connect}.get(method)
            if fn is None:
                return self._stream_error(req, ConnectError(
                    "unimplemented", "%s.%s is not implemented" % (svc, method)))
            try:
                return fn(req, b, msg)
            except ConnectError as e:
                return self._stream_error(req, e)
        if ctype != "application/json":
            return req.send(415, b"", None, {"Accept-Post": "application/json"})
        try:
            msg = json.loads(req.body or b"{}")
            if not isinstance(msg, dict):
                raise ValueError("not an object")
        except ValueError as e:
            return self._unary_error(req, ConnectError("invalid_argument",
                                                       "unmarshal message: %s" % e))
        table = {
            ("process.Process", "List"): self.p_list,
            ("process.Process", "SendInput"): self.p_send_input,
            ("process.Process", "CloseStdin"): self.p_close_stdin,
            ("process.Process", "SendSignal"): self.p_send_signal,
            ("filesystem.Filesystem", "Stat"): self.fs_stat,
            ("filesystem.Filesystem", "MakeDir"): self.fs_mkdir,
            ("filesystem.Filesystem", "Move"): self.fs_move,
            ("filesystem.Filesystem", "ListDir"): self.fs_list,
            ("filesystem.Filesystem", "Remove"): self.fs_remove,
        }
        fn = table.get((svc, method))
        try:
            if fn is None:
                raise ConnectError("unimplemented", "%s.%s is not implemented" % (svc, method))
            res = fn(req, b, msg)
        except ConnectError as e:
            return self._unary_error(req, e)
        return req.send_json(200, res)

    def _unary_error(self, req, e):
        req.fault = None
        return req.send(CONNECT_HTTP.get(e.code, 500), json_bytes(e.body()), "application/json")

    def _stream_error(self, req, e):
        st = req.stream(200, "application/connect+json", framing="connect")
        st.end(json_bytes({"error": e.body()}))

    def _auth_user(self, req):
        h = req.headers.get("Authorization") or ""
        name = None
        if h.lower().startswith("basic "):
            try:
                name = base64.b64decode(h[6:].strip()).decode().split(":", 1)[0]
            except (ValueError, UnicodeDecodeError):
                raise ConnectError("unauthenticated", "invalid authorization header")
        u = self._user(name)
        if u is None:
            raise ConnectError("unauthenticated", "invalid username: '%s'" % name)
        return u

    def _selector(self, b, msg):
        sel = msg.get("process") or {}
        if "pid" in sel:
            try:
                pid = int(sel["pid"])
            except (TypeError, ValueError):
                raise ConnectError("invalid_argument", "invalid pid")
            p = b.procs.get(pid)
            if p is None:
                raise ConnectError("not_found", "process with pid %d not found" % pid)
            return p
        if "tag" in sel:
            for p in list(b.procs.values()):
                if p.tag == sel["tag"]:
                    return p
            raise ConnectError("not_found", "process with tag %s not found" % sel["tag"])
        raise ConnectError("unimplemented", "invalid input type <nil>")

    def _deadline(self, req):
        h = req.headers.get("Connect-Timeout-Ms")
        if not h:
            return None
        try:
            ms = int(h)
        except ValueError:
            raise ConnectError("invalid_argument", "strconv.Atoi: parsing %r: invalid syntax" % h)
        return time.monotonic() + ms / 1000.0 if ms > 0 else None

    def _keepalive(self, req):
        try:
            v = int(req.headers.get("Keepalive-Ping-Interval") or 0)
        except ValueError:
            v = 0
        return v if v > 0 else 90

    def p_start(self, req, b, msg):
        name, uid, home = self._auth_user(req)
        deadline = self._deadline(req)
        proc = msg.get("process") or {}
        cmd = proc.get("cmd")
        if not isinstance(cmd, str) or not cmd:
            raise ConnectError("invalid_argument", "process.cmd is required")
        args = proc.get("args") or []
        envs = proc.get("envs") or {}
        if msg.get("pty") is not None:
            raise ConnectError("unimplemented", "pty is not supported by this fake")
        cwd = self._resolve(proc.get("cwd"), home)
        stdin = msg.get("stdin", True) is not False
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": home, "USER": name, "LOGNAME": name}
        env.update(b.env_vars)
        env.update({str(k): str(v) for k, v in envs.items()})
        ex = self.sbx.exec(b.backing, [cmd] + [str(a) for a in args], env=env, cwd=cwd,
                           user=uid, stdin=stdin)
        p = Proc(b, ex, {"cmd": cmd, "args": list(args), "envs": envs,
                         "cwd": proc.get("cwd")}, msg.get("tag"))
        q = p.subscribe()
        threading.Thread(target=p.pump, daemon=True).start()
        ev = q.get()
        pending = []
        if ev[0] == "start":
            # a command that cannot be executed fails its start, as envd's does: the
            # wrapper's exec fails just after it said start
            try:
                pending.append(q.get(timeout=0.05))
            except queue.Empty:
                pass
            if pending and pending[0][0] == "end" and pending[0][1].error:
                ev = pending.pop()
        if ev[0] == "end":
            info = ev[1]
            if info.error and "cannot change to directory" in info.error:
                raise ConnectError("invalid_argument", "cwd '%s' does not exist" % cwd)
            raise ConnectError("invalid_argument", "error starting process '%s': %s"
                               % (" ".join([cmd] + list(args)), info.error or info.go_status()))
        return self._serve_events(req, p, q, ev, deadline, kill_on_deadline=True,
                                  pending=pending)

    def p_connect(self, req, b, msg):
        deadline = self._deadline(req)
        p = self._selector(b, msg)
        q = p.subscribe()
        if q is None:
            raise ConnectError("not_found", "process with pid %s not found" % p.pid)
        return self._serve_events(req, p, q, ("start", p.pid), deadline, kill_on_deadline=False)

    def _serve_events(self, req, p, q, first, deadline, kill_on_deadline, pending=()):
        pending = list(pending)
        ka = self._keepalive(req)
        st = req.stream(200, "application/connect+json", framing="connect")
        try:
            st.send(json_bytes({"event": {"start": {"pid": first[1]}}}))
            last = time.monotonic()
            while True:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    if kill_on_deadline:
                        threading.Thread(target=p.ex.kill, daemon=True).start()
                    st.end(json_bytes({"error": {"code": "deadline_exceeded",
                                                 "message": "context deadline exceeded"}}))
                    return
                wait = ka - (now - last)
                if deadline is not None:
                    wait = min(wait, deadline - now)
                try:
                    kind, val = pending.pop(0) if pending else q.get(timeout=max(wait, 0.01))
                except queue.Empty:
                    if time.monotonic() - last >= ka:
                        st.send(json_bytes({"event": {"keepalive": {}}}))
                        last = time.monotonic()
                    continue
                if kind in ("stdout", "stderr"):
                    for i in range(0, len(val), 32 << 10):
                        chunk = b64(val[i:i + (32 << 10)])
                        st.send(json_bytes({"event": {"data": {kind: chunk}}}))
                    last = time.monotonic()
                elif kind == "end":
                    if p.box.state == "killed":
                        # the sandbox went away under the command: the connection drops, as
                        # it does through the real proxy
                        st.abort()
                        raise ClientGone("sandbox killed")
                    end = {}
                    code = val.exit_code()
                    if code:
                        end["exitCode"] = code
                    if val.exited:
                        end["exited"] = True
                    end["status"] = val.go_status()
                    if not (val.exited and val.code == 0):
                        end["error"] = val.go_status()
                    st.send(json_bytes({"event": {"end": end}}))
                    st.end(b"{}")
                    return
        except ClientGone:
            raise
        finally:
            p.unsubscribe(q)

    def p_list(self, req, b, msg):
        out = []
        for pid, p in sorted(b.procs.items()):
            cfg = {"cmd": p.config["cmd"]}
            if p.config["args"]:
                cfg["args"] = p.config["args"]
            if p.config["envs"]:
                cfg["envs"] = p.config["envs"]
            if p.config.get("cwd"):
                cfg["cwd"] = p.config["cwd"]
            info = {"config": cfg, "pid": pid}
            if p.tag is not None:
                info["tag"] = p.tag
            out.append(info)
        return {"processes": out} if out else {}

    def p_send_input(self, req, b, msg):
        p = self._selector(b, msg)
        inp = msg.get("input") or {}
        if "stdin" in inp:
            try:
                data = base64.b64decode(inp["stdin"])
            except (ValueError, TypeError):
                raise ConnectError("invalid_argument", "invalid base64 in input.stdin")
            try:
                p.ex.write(data)
            except (OSError, ValueError) as e:
                raise ConnectError("internal", "error writing to stdin: %s" % (
                    "stdin not enabled or closed" if isinstance(e, BrokenPipeError) else e))
            return {}
        if "pty" in inp:
            raise ConnectError("internal", "error writing to tty: tty not assigned to process")
        raise ConnectError("unimplemented", "invalid input type <nil>")

    def p_close_stdin(self, req, b, msg):
        p = self._selector(b, msg)
        p.ex.close_stdin()
        return {}

    def p_send_signal(self, req, b, msg):
        p = self._selector(b, msg)
        sig = msg.get("signal")
        names = {"SIGNAL_SIGKILL": 9, "SIGNAL_SIGTERM": 15, 9: 9, 15: 15}
        if sig not in names:
            raise ConnectError("unimplemented", "invalid signal: %s" % sig)
        if not p.ex.signal(names[sig]):
            if p.ended or p.ex.done:
                raise ConnectError("not_found", "process with pid %s not found" % p.pid)
            raise ConnectError("internal", "error sending signal: %s" % sig)
        return {}

    def _fs(self, b, req, op, *args):
        name, uid, home = self._auth_user(req)
        return self.sbx.fs(b.backing, op, *args, user=uid), home

    def _path_arg(self, req, msg, key="path"):
        name, uid, home = self._auth_user(req)
        v = msg.get(key)
        if not isinstance(v, str):
            v = ""
        return self._resolve(v, home)

    def fs_stat(self, req, b, msg):
        path = self._path_arg(req, msg)
        try:
            e, _ = self._fs(b, req, "stat", path)
        except OSError as err:
            raise oserror_to_connect(err, "file not found: stat %s" % path
                                     if isinstance(err, FileNotFoundError) else path)
        return {"entry": entry_info(e)}

    def fs_mkdir(self, req, b, msg):
        path = self._path_arg(req, msg)
        try:
            r, _ = self._fs(b, req, "mkdir", path)
        except FileExistsError:
            raise ConnectError("invalid_argument",
                               "path already exists but it is not a directory: %s" % path)
        except OSError as err:
            raise oserror_to_connect(err, path)
        if not r["created"]:
            raise ConnectError("already_exists", "directory already exists: %s" % path)
        return {"entry": {"name": posixpath.basename(path) or "/",
                          "type": "FILE_TYPE_DIRECTORY", "path": path}}

    def fs_move(self, req, b, msg):
        src = self._path_arg(req, msg, "source")
        dst = self._path_arg(req, msg, "destination")
        try:
            e, _ = self._fs(b, req, "move", src, dst)
        except OSError as err:
            raise oserror_to_connect(err, "source file not found: %s" % src
                                     if isinstance(err, FileNotFoundError) else src)
        return {"entry": entry_info(e)}

    def fs_list(self, req, b, msg):
        path = self._path_arg(req, msg)
        try:
            depth = int(msg.get("depth") or 1)
        except (TypeError, ValueError):
            raise ConnectError("invalid_argument", "invalid depth")
        try:
            entries, _ = self._fs(b, req, "list", path, depth)
        except NotADirectoryError:
            raise ConnectError("invalid_argument", "path is not a directory: %s" % path)
        except OSError as err:
            raise oserror_to_connect(err, "path not found: %s" % path
                                     if isinstance(err, FileNotFoundError) else path)
        out = [entry_info(e) for e in entries]
        return {"entries": out} if out else {}

    def fs_remove(self, req, b, msg):
        path = self._path_arg(req, msg)
        try:
            self._fs(b, req, "remove", path)
        except OSError as err:
            raise oserror_to_connect(err, "file not found: %s" % path
                                     if isinstance(err, FileNotFoundError) else path)
        return {}


def utc(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


def parse_time(s):
    import datetime
    s = s.strip().replace("Z", "+00:00")
    m = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$", s)
    if m and m.group(2):
        s = m.group(1) + m.group(2)[:7] + m.group(3)
    return datetime.datetime.fromisoformat(s).timestamp()


if __name__ == "__main__":
    fakelib.run(E2BFake)
