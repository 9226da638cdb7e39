#!/usr/bin/python3
"""A loopback fake of a Kubernetes apiserver (and of the agent-sandbox controller), for sbx's
kubernetes provider; on tests/fakes/fakelib.py. kubectl and @kubernetes/client-node drive it
(tests/t0730-k8s-fake.sh): what they cannot use is a bug of the fake.

Every pod is a REAL local sbx sandbox, made with `$SBX create` in the fake's own SBX_HOME
(--sbx, --sbx-home): the host-root sandbox (no --image: the pod's image is recorded, not
pulled), so sh, tar, perl and python3 are there. exec runs `$SBX exec` with the argv given,
so exit codes, signals, stdin EOF, a tty and kubectl cp (tar) behave for real. Run by an
unprivileged user, a pod has the ids sbx gives that user: without subordinate ids only uid 0,
so a tar that keeps owners (kubectl cp into a pod) fails there. PVC and emptyDir directories
live in SBX_HOME.k8s-volumes (removed at shutdown). resources, securityContext, probes and
the image are recorded and ignored.

Start (the test makes the CA and the certificate, with SAN IP:127.0.0.1):
    k8s.py --sbx SBX --sbx-home DIR --port-file F --tls-cert CERT --tls-key KEY --token T
           [--no-agent-sandbox] [--pending-seconds S] [--unschedulable] [--tls-client-ca CA]
           [--verbose]
  --token T             every API request needs "Authorization: Bearer T" (else 401 Status;
                        /healthz /livez /readyz need none)
  --no-agent-sandbox    the agents.x-k8s.io and extensions.agents.x-k8s.io groups are not
                        served (not in discovery, 404 below /apis/...)
  --pending-seconds S   how long a pod stays Pending before it is scheduled (default 0.3);
                        the sandbox is then made and the pod becomes Running
  --unschedulable       no pod is ever scheduled (as POST /_fake/k8s/schedulable false)
  --tls-client-ca CA    a client certificate signed by CA authenticates as a token does
Prints "k8s fake listening on https://127.0.0.1:PORT"; SIGTERM removes every sandbox it made.

API served (JSON only; no protobuf, no openapi: `kubectl create/apply` need --validate=false):
  /version /api /apis /api/v1 /apis/G /apis/G/V   discovery; /api and /apis answer the
      aggregated APIGroupDiscoveryList (apidiscovery.k8s.io v2 or v2beta1) when the Accept
      header asks for it, else APIVersions / APIGroupList
  namespaces            create get list delete (default, kube-system, kube-public exist)
  pods                  create get list (labelSelector, fieldSelector metadata.name /
      metadata.namespace / status.phase, limit+continue) delete; a Table (meta.k8s.io/v1) when
      Accept asks as=Table (kubectl get). Pending -> Running after --pending-seconds and the
      sandbox's creation, conditions PodScheduled Initialized ContainersReady Ready. A pod whose
      nodeSelector does not match the node (labels kubernetes.io/hostname=fake-node,
      kubernetes.io/os=linux, kubernetes.io/arch=amd64), or made while unschedulable, stays
      Pending: PodScheduled False, reason Unschedulable and a message. The container's
      command+args (if any) run in the sandbox as its main process: when it ends the pod is
      Succeeded (0) or Failed (no restarts); its output is the pods/log. env (value only) and
      workingDir come from the first container; volumes persistentVolumeClaim and emptyDir are
      directories bound in (sbx create -v) at the container's volumeMounts. All containers of a
      pod share its one sandbox. DELETE answers the pod and removes it at once (the sandbox goes
      in the background). metadata.generateName works. PUT/PATCH change labels and
      annotations; a change of spec is 422 Invalid.
  pods/exec             GET (or POST) WebSocket, protocols v5.channel.k8s.io (preferred) and
      v4.channel.k8s.io; query command= (repeated), stdin stdout stderr tty container. The
      empty "ready" frame on the lowest open output channel, 1 stdout, 2 stderr, 0 stdin,
      v5 `ff 00` closes stdin, 4 resize {"Width","Height"} (tty), 3 the Status: Success, or
      Failure NonZeroExitCode with details.causes [{reason ExitCode, message N}] (128+signal
      for a signal death), or InternalError for a command that cannot be run; then a close
      frame 1000, and up to 2 s for the client's close frame (or EOF). Pings are answered.
      SPDY is refused (400), as is a pod not Running (400, before any upgrade). A client that
      goes away leaves its command running, as a kubelet does (its output is dropped).
  pods/proxy            GET POST PUT PATCH DELETE .../pods/NAME[:PORT]/proxy/PATH: the request is
      made to 127.0.0.1:PORT (default 80) inside the sandbox, through `$SBX exec` (no
      published port needed); 503 Status when nothing listens there
  pods/log              the main process's output (last 1 MiB)
  persistentvolumeclaims  create get list delete; Bound at once (a directory of the fake's);
      deleting one a pod uses leaves it Terminating (deletionTimestamp, finalizer
      kubernetes.io/pvc-protection) until no pod uses it
  agents.x-k8s.io/v1alpha1 sandboxes, extensions.agents.x-k8s.io/v1alpha1 sandboxtemplates,
      sandboxclaims and sandboxwarmpools: create get list delete, PUT and PATCH (merge,
      strategic-merge, JSON patch) of spec. The controller (every 0.2 s): a Sandbox with replicas 1 (default) has a pod of
      its name (podTemplate, label agents.x-k8s.io/sandbox-name, owner reference) and the PVCs
      of its volumeClaimTemplates (named TEMPLATE-SANDBOX, mounted as volume TEMPLATE);
      replicas 0 deletes the pod and keeps the PVCs; past spec.shutdownTime the pod goes
      (shutdownPolicy Delete: the Sandbox too). status: replicas, selector, serviceFQDN,
      conditions [Ready True DependenciesReady | False DependenciesNotReady | False
      SandboxExpired]. A SandboxWarmPool (spec.replicas, spec.sandboxTemplateRef.name) keeps
      that many Sandboxes of its template, named POOL-xxxxx (label
      agents.x-k8s.io/warm-pool-sandbox). A SandboxClaim (spec.sandboxTemplateRef.name) adopts
      a ready Sandbox of a warm pool of its template (unless spec.warmpool is "none", or names
      another pool, or spec.env is set): the Sandbox is handed to the claim (owner, the pool's
      label gone, annotation agents.x-k8s.io/pod-name), and the pool makes another; else it
      gets a Sandbox of its own name from the template, spec.env injected when the template's
      envVarsInjectionPolicy is Allowed or Overrides (else Ready False
      EnvVarsInjectionRejected). status.sandbox.name names its Sandbox; condition Ready as the
      Sandbox's, TemplateNotFound when missing. Past spec.lifecycle.shutdownTime: policy Delete
      (DeleteForeground) deletes the claim, Retain its Sandbox (Ready False ClaimExpired).
      Deleting an owner deletes what it owns (PVCs of a Sandbox included).
  watch=true on lists   JSON lines of {"type": ADDED|MODIFIED|DELETED, "object"}, polled every
      0.1 s, ends after timeoutSeconds (default 60, at most 300)
Errors are metav1.Status bodies: {"kind":"Status","apiVersion":"v1","status":"Failure",
"message","reason","code","details"?}; reasons NotFound AlreadyExists Conflict Unauthorized
Forbidden BadRequest Invalid MethodNotAllowed TooManyRequests (details.retryAfterSeconds 1)
InternalError ServiceUnavailable.

Control API (fakelib's, over the same HTTPS, no token: curl --cacert CA):
  POST /_fake/faults {"match": "METHOD PATH-REGEX", "kind": ...}   fakelib's kinds (a status
      fault's default body is the Status of that code: 401 403 404 409 429 500 ...; give
      "headers": {"Retry-After": "1"} for a 429) and two of the exec's own:
        ws_close       the WebSocket is cut (no close frame, no Status) after "frames"
                       (default 1) output frames, or at the command's end if it wrote fewer;
                       the command is ended
        no_exit_code   the final Status is Failure NonZeroExitCode without details (no exit
                       code), whatever the command's status
        exec_hold      the command's end is not told (no Status, no close) until the client
                       goes, as when a process it left holds its streams open on a kubelet
        ws_ping        a ping ("payload", default "fake-ping") follows the ready frame; the
                       pongs that come back are in /_fake/state's "pongs"
        ws_idle        the WebSocket is cut once the client sent no frame (a ping will do) for
                       "seconds" (default 10), as an idle-timing proxy does
  GET /_fake/requests, DELETE /_fake/requests, GET/DELETE /_fake/faults   as fakelib
  GET  /_fake/state    {"pods": {"NS/NAME": {"phase", "sandbox": ID|null}}, "pvcs": [NS/NAME],
                       "sandboxes": [NS/NAME], "claims": [NS/NAME], "warmpools": [NS/NAME],
                       "backing": [IDs], "pongs": [payloads]}
  POST /_fake/k8s/image-fail {"image", "reason": "ErrImagePull"|"ImagePullBackOff"|
                       "InvalidImageName"|null, "message"?}   pods of that image stay Pending,
                       their container waiting for that reason (null: pulls work again)
  POST /_fake/k8s/schedulable {"schedulable": false|true}   false: pods stay Pending
                       Unschedulable from now on; true: the Pending ones are scheduled
  POST /_fake/k8s/pod-phase {"namespace", "name", "phase": "Failed"|"Succeeded", "reason"?,
                       "message"?}   the pod ends so (its sandbox is removed), as an eviction
"""
import copy
import datetime
import fcntl
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
import threading
import time
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakelib  # noqa: E402
from fakelib import HTTPError  # noqa: E402

NODE = "fake-node"
NODE_LABELS = {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux",
               "kubernetes.io/arch": "amd64"}
AGENTS = "agents.x-k8s.io"
EXT = "extensions.agents.x-k8s.io"
VERSION = "v1alpha1"
REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
           415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
           500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
POD_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

# resource -> group, version, kind, namespaced, short names, subresources {name: kind}
RESOURCES = {
    "namespaces": ("", "v1", "Namespace", False, ["ns"], {}),
    "pods": ("", "v1", "Pod", True, ["po"],
             {"exec": "PodExecOptions", "proxy": "PodProxyOptions", "log": "Pod",
              "status": "Pod"}),
    "persistentvolumeclaims": ("", "v1", "PersistentVolumeClaim", True, ["pvc"],
                               {"status": "PersistentVolumeClaim"}),
    "sandboxes": (AGENTS, VERSION, "Sandbox", True, [], {"status": "Sandbox"}),
    "sandboxtemplates": (EXT, VERSION, "SandboxTemplate", True, [], {}),
    "sandboxclaims": (EXT, VERSION, "SandboxClaim", True, [], {"status": "SandboxClaim"}),
    "sandboxwarmpools": (EXT, VERSION, "SandboxWarmPool", True, ["swp"],
                         {"status": "SandboxWarmPool"}),
}
WARM_LABEL = "agents.x-k8s.io/warm-pool-sandbox"
NO_TAR_IMAGE = "sbx-fake/no-tar"   # an image whose commands find no tar
POD_NAME_ANNOTATION = "agents.x-k8s.io/pod-name"

# the proxy's connection inside the sandbox: stdin -> 127.0.0.1:PORT -> stdout
_FORWARD = r'''
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
except OSError as e:
    sys.stderr.write("dial tcp 127.0.0.1:%s: connect: %s\n" % (sys.argv[1], e.strerror or e))
    sys.exit(7)
s.sendall(sys.stdin.buffer.read())
s.shutdown(socket.SHUT_WR)
while True:
    b = s.recv(65536)
    if not b:
        break
    sys.stdout.buffer.write(b)
'''


class K8sError(HTTPError):
    def __init__(self, status, message, reason=None, details=None, headers=None):
        super().__init__(status, message, headers)
        self.reason = reason or REASONS.get(status, "Unknown")
        self.details = details


def status_body(code, message, reason=None, details=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": message, "reason": reason or REASONS.get(code, "Unknown"), "code": code}
    if details is None and code == 429:
        details = {"retryAfterSeconds": 1}
    if details:
        st["details"] = details
    return st


def not_found(res, name):
    group = RESOURCES[res][0]
    what = res + ("." + group if group else "")
    return K8sError(404, '%s "%s" not found' % (what, name), "NotFound",
                    {"name": name, "group": group, "kind": res})


def now_iso():
    return fakelib.utc_iso(frac=False)


def parse_time(s):
    try:
        return datetime.datetime.strptime(s.replace("Z", "+0000").split(".")[0].replace(
            "+0000", "") + "+0000", "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except (ValueError, AttributeError):
        return None


def age(ts):
    t = parse_time(ts) or time.time()
    s = max(0, int(time.time() - t))
    if s < 120:
        return "%ds" % s
    if s < 7200:
        return "%dm" % (s // 60)
    if s < 172800:
        return "%dh" % (s // 3600)
    return "%dd" % (s // 86400)


def truthy(v):
    return (v or "").lower() in ("1", "true", "yes")


# --- selectors ----------------------------------------------------------------------------

def split_selector(sel):
    out, depth, cur = [], 0, ""
    for c in sel:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur)
    return [t.strip() for t in out if t.strip()]


def label_matcher(sel):
    """A function labels -> bool; K8sError 400 for a selector it cannot parse."""
    tests = []
    for term in split_selector(sel or ""):
        m = re.match(r"^([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)$", term)
        if m:
            k, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if op == "in":
                tests.append(lambda L, k=k, v=vals: L.get(k) in v)
            else:
                tests.append(lambda L, k=k, v=vals: L.get(k) not in v)
            continue
        m = re.match(r"^([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)$", term)
        if m:
            k, op, v = m.groups()
            if op == "!=":
                tests.append(lambda L, k=k, v=v: L.get(k) != v)
            else:
                tests.append(lambda L, k=k, v=v: L.get(k) == v)
            continue
        m = re.match(r"^(!?)([^\s!=(),]+)$", term)
        if m:
            neg, k = m.groups()
            tests.append(lambda L, k=k, n=bool(neg): (k in L) != n)
            continue
        raise K8sError(400, "unable to parse requirement: %r" % term)
    return lambda labels: all(t(labels or {}) for t in tests)


def field_matcher(sel):
    tests = []
    for term in split_selector(sel or ""):
        m = re.match(r"^([a-zA-Z.]+)\s*(==|=|!=)\s*(.*)$", term)
        if not m or m.group(1) not in ("metadata.name", "metadata.namespace", "status.phase",
                                       "spec.nodeName"):
            raise K8sError(400, 'field label not supported: "%s"' % term.split("=")[0])
        path, op, v = m.groups()

        def get(o, path=path):
            for p in path.split("."):
                o = (o or {}).get(p)
            return o or ""
        tests.append(lambda o, g=get, v=v, neg=(op == "!="): (g(o) == v) != neg)
    return lambda obj: all(t(obj) for t in tests)


# --- patches ------------------------------------------------------------------------------

def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def json_patch(doc, ops):
    doc = copy.deepcopy(doc)
    for op in ops if isinstance(ops, list) else []:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op.get("path", "").split("/")[1:]]
        if not parts:
            raise K8sError(422, "a JSON patch needs a path", "Invalid")
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent.setdefault(p, {})
        last = parts[-1]
        kind = op.get("op")
        if kind in ("add", "replace"):
            if isinstance(parent, list):
                i = len(parent) if last == "-" else int(last)
                if kind == "add":
                    parent.insert(i, op.get("value"))
                else:
                    parent[i] = op.get("value")
            else:
                parent[last] = op.get("value")
        elif kind == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                parent.pop(last, None)
        elif kind == "test":
            got = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if got != op.get("value"):
                raise K8sError(422, "test operation failed at %s" % op.get("path"), "Invalid")
        else:
            raise K8sError(422, "unsupported JSON patch op %r" % kind, "Invalid")
    return doc


# --- the fake -----------------------------------------------------------------------------

class Kube(fakelib.Provider):
    name = "k8s"
    fault_kinds = ("ws_close", "no_exit_code", "exec_hold", "ws_ping", "ws_idle")

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--token", required=True, help="the bearer token clients must send")
        parser.add_argument("--no-agent-sandbox", action="store_true",
                            help="do not serve the agent-sandbox API groups")
        parser.add_argument("--pending-seconds", type=float, default=0.3)
        parser.add_argument("--unschedulable", action="store_true")

    def __init__(self, args, sbx, server):
        super().__init__(args, sbx, server)
        self.lock = threading.RLock()
        self.objs = {}          # (resource, namespace, name) -> object
        self.rt = {}            # pod uid -> runtime: sid, main, log, dirs, gone
        self.events = []        # (resourceVersion, type, resource, object) for watches
        self.rv = 1000
        self.schedulable = not args.unschedulable
        self.pongs = []         # the payloads of the clients' pongs to exec pings (ws_ping)
        self.image_fail = {}    # image -> (reason, message): its pods never start
        self.agents = not args.no_agent_sandbox
        self.volumes = os.path.abspath(args.sbx_home) + ".k8s-volumes"
        os.makedirs(self.volumes, exist_ok=True)
        for ns in ("default", "kube-system", "kube-public"):
            self._create("namespaces", "", {"metadata": {"name": ns}})
        server.add_ticker(0.2, self.tick)

    # --- errors and auth
    def error_body(self, status, message):
        return fakelib.json_bytes(status_body(status, message)), "application/json"

    def send_status(self, req, e):
        req.send_json(e.status, status_body(e.status, e.message, e.reason, e.details),
                      e.headers)

    def handle(self, req):
        if req.path in ("/healthz", "/livez", "/readyz"):
            return req.send(200, b"ok", "text/plain")
        auth = req.headers.get("Authorization") or ""
        # a bearer token, or a client certificate of --tls-client-ca's (x509 comes first)
        if req.peer_cn is None and auth != "Bearer " + self.args.token:
            return self.send_status(req, K8sError(401, "Unauthorized"))
        try:
            self.route(req)
        except K8sError as e:
            if req.responded:
                raise fakelib.ClientGone("error after the answer: %s" % e.message)
            self.send_status(req, e)
        except HTTPError as e:
            if req.responded:
                raise
            self.send_status(req, K8sError(e.status, e.message, headers=e.headers))

    # --- routing
    def route(self, req):
        p = req.path.rstrip("/") or "/"
        if p == "/version":
            return req.send_json(200, {
                "major": "1", "minor": "32", "gitVersion": "v1.32.0-sbxfake",
                "gitCommit": "0" * 40, "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0", "compiler": "gc",
                "platform": "linux/amd64"})
        if p in ("/api", "/apis"):
            return self.discovery_root(req, p)
        if p == "/api/v1":
            return self.resource_list(req, "", "v1")
        m = re.match(r"^/apis/([^/]+)(?:/([^/]+))?$", p)
        if m:
            g, v = m.groups()
            if g not in self.groups():
                raise K8sError(404, "the server could not find the requested resource")
            if v is None:
                return req.send_json(200, dict(self.group_doc(g), kind="APIGroup",
                                               apiVersion="v1"))
            if v != VERSION:
                raise K8sError(404, "the server could not find the requested resource")
            return self.resource_list(req, g, v)
        m = re.match(r"^/api/v1/namespaces/([^/]+)/([a-z]+)(?:/([^/]+)(?:/([a-z]+)(/.*)?)?)?$",
                     req.path)
        if m:
            ns, res, name, sub, rest = m.groups()
            if res not in RESOURCES or RESOURCES[res][0] != "":
                raise K8sError(404, "the server could not find the requested resource")
            return self.resource(req, res, ns, name, sub, rest)
        m = re.match(r"^/api/v1/([a-z]+)(?:/([^/]+)(?:/([a-z]+))?)?$", p)
        if m:
            res, name, sub = m.groups()
            if res not in RESOURCES or RESOURCES[res][0] != "":
                raise K8sError(404, "the server could not find the requested resource")
            if res == "namespaces":
                return self.resource(req, res, "", name, sub, None)
            if name is None and req.method == "GET":
                return self.list(req, res, None)
            raise K8sError(404, "the server could not find the requested resource")
        m = re.match(r"^/apis/([^/]+)/([^/]+)(?:/namespaces/([^/]+))?/([a-z]+)"
                     r"(?:/([^/]+)(?:/([a-z]+))?)?$", p)
        if m:
            g, v, ns, res, name, sub = m.groups()
            if g not in self.groups() or v != VERSION or res not in RESOURCES or \
                    RESOURCES[res][0] != g:
                raise K8sError(404, "the server could not find the requested resource")
            if ns is None:
                if name is None and req.method == "GET":
                    return self.list(req, res, None)
                raise K8sError(404, "the server could not find the requested resource")
            return self.resource(req, res, ns, name, sub, None)
        raise K8sError(404, "the server could not find the requested resource")

    def groups(self):
        return (AGENTS, EXT) if self.agents else ()

    def resource(self, req, res, ns, name, sub, rest):
        if res != "namespaces" and ("namespaces", "", ns) not in self.objs and \
                req.method != "GET":
            raise not_found("namespaces", ns)
        meth = req.method
        if name is None:
            if meth == "GET":
                return self.list(req, res, ns)
            if meth == "POST":
                obj = self.create(res, ns, self.body(req))
                return req.send_json(201, obj)
            raise K8sError(405, "the server does not allow this method on the requested resource")
        if res == "pods" and (sub == "proxy" or ":" in name):
            if sub != "proxy":
                raise K8sError(404, "the server could not find the requested resource")
            return self.proxy(req, ns, name, rest or "/")
        if sub == "exec" or sub == "attach":
            if sub == "attach":
                raise K8sError(400, "attach is not supported by this fake")
            return self.exec(req, ns, name)
        if sub == "log":
            return self.log(req, ns, name)
        if sub not in (None, "status"):
            raise K8sError(404, "the server could not find the requested resource")
        if meth == "GET":
            obj = self.get(res, ns, name)
            return self.send_obj(req, res, obj)
        if meth == "DELETE":
            return req.send_json(200, self.delete(res, ns, name))
        if meth in ("PUT", "PATCH"):
            return req.send_json(200, self.update(req, res, ns, name, sub == "status"))
        raise K8sError(405, "the server does not allow this method on the requested resource")

    def body(self, req):
        try:
            obj = json.loads(req.body or b"null")
        except ValueError as e:
            raise K8sError(400, "the body of the request was in an unknown format: %s" % e)
        if not isinstance(obj, dict):
            raise K8sError(400, "the body of the request is not an object")
        return obj

    # --- discovery
    def res_entries(self, group):
        out = []
        for res, (g, v, kind, nsd, short, subs) in sorted(RESOURCES.items()):
            if g == group:
                out.append((res, v, kind, nsd, short, subs))
        return out

    def resource_list(self, req, group, version):
        items = []
        for res, v, kind, nsd, short, subs in self.res_entries(group):
            e = {"name": res, "singularName": kind.lower(), "namespaced": nsd, "kind": kind,
                 "verbs": POD_VERBS}
            if short:
                e["shortNames"] = short
            if res == "pods":
                e["categories"] = ["all"]
            items.append(e)
            for sub, skind in sorted(subs.items()):
                items.append({"name": res + "/" + sub, "singularName": "", "namespaced": nsd,
                              "kind": skind, "verbs": self.sub_verbs(sub)})
        gv = version if not group else group + "/" + version
        req.send_json(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                            "resources": items})

    @staticmethod
    def sub_verbs(sub):
        return {"exec": ["create", "get"], "log": ["get"],
                "proxy": ["create", "delete", "get", "patch", "update"]}.get(
                    sub, ["get", "patch", "update"])

    def group_doc(self, g):
        gv = {"groupVersion": g + "/" + VERSION, "version": VERSION}
        return {"name": g, "versions": [gv], "preferredVersion": gv}

    def discovery_root(self, req, p):
        accept = req.headers.get("Accept") or ""
        agg = None
        for part in accept.split(","):
            if "as=APIGroupDiscoveryList" in part and "g=apidiscovery.k8s.io" in part:
                m = re.search(r"v=(v2beta1|v2)\b", part)
                if m:
                    agg = m.group(1)
                    break
        if agg is None:
            if p == "/api":
                return req.send_json(200, {
                    "kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                    "serverAddress": "127.0.0.1:%d" %
                                                    self.server.port}]})
            return req.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                       "groups": [self.group_doc(g) for g in self.groups()]})
        items = []
        for g in ([""] if p == "/api" else self.groups()):
            resources = []
            for res, v, kind, nsd, short, subs in self.res_entries(g):
                e = {"resource": res, "responseKind": {"group": g, "version": v, "kind": kind},
                     "scope": "Namespaced" if nsd else "Cluster",
                     "singularResource": kind.lower(), "verbs": POD_VERBS}
                if short:
                    e["shortNames"] = short
                if res == "pods":
                    e["categories"] = ["all"]
                if subs:
                    e["subresources"] = [
                        {"subresource": sub, "responseKind": {"group": g, "version": v,
                                                              "kind": skind},
                         "verbs": self.sub_verbs(sub)} for sub, skind in sorted(subs.items())]
                resources.append(e)
            meta = {"creationTimestamp": None}
            if g:
                meta["name"] = g
            items.append({"metadata": meta, "versions": [
                {"version": "v1" if not g else VERSION, "resources": resources,
                 "freshness": "Current"}]})
        ctype = "application/json;g=apidiscovery.k8s.io;v=%s;as=APIGroupDiscoveryList" % agg
        req.send(200, fakelib.json_bytes({"kind": "APIGroupDiscoveryList",
                                          "apiVersion": "apidiscovery.k8s.io/" + agg,
                                          "metadata": {}, "items": items}), ctype)

    # --- the store
    def _bump(self):
        self.rv += 1
        return str(self.rv)

    def _event(self, typ, res, obj):
        self.events.append((int(obj["metadata"]["resourceVersion"]), typ, res,
                            copy.deepcopy(obj)))
        if len(self.events) > 5000:
            del self.events[:1000]

    def _create(self, res, ns, obj):
        """Stores a new object (the caller holds the lock or is alone); the stored copy."""
        g, v, kind, nsd, _, _ = RESOURCES[res]
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise K8sError(400, "metadata must be an object")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + fakelib.new_id(5, "bcdfghjklmnpqrstvwxz2456789")
        name = meta.get("name")
        if not name:
            raise K8sError(422, "%s \"\" is invalid: metadata.name: Required value: name or "
                           "generateName is required" % kind, "Invalid",
                           {"kind": kind, "causes": [{"reason": "FieldValueRequired",
                                                      "field": "metadata.name"}]})
        if not NAME_RE.match(name) or len(name) > 253 or (res == "namespaces" and
                                                          (len(name) > 63 or "." in name)):
            raise K8sError(422, '%s "%s" is invalid: metadata.name: Invalid value: "%s": a '
                           "lowercase RFC 1123 subdomain must consist of lower case "
                           "alphanumeric characters, '-' or '.'" % (kind, name, name),
                           "Invalid", {"name": name, "kind": kind})
        if nsd:
            if meta.get("namespace") not in (None, "", ns):
                raise K8sError(400, "the namespace of the provided object does not match the "
                               "namespace sent on the request")
            meta["namespace"] = ns
        if (res, ns, name) in self.objs:
            raise K8sError(409, '%s "%s" already exists' % (res + ("." + g if g else ""), name),
                           "AlreadyExists", {"name": name, "group": g, "kind": res})
        obj["apiVersion"] = (g + "/" if g else "") + v
        obj["kind"] = kind
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_iso()
        meta["generation"] = 1
        meta["resourceVersion"] = self._bump()
        for k in ("deletionTimestamp", "selfLink"):
            meta.pop(k, None)
        if res != "namespaces":
            obj.setdefault("spec", {})
        self.init_status(res, obj)
        self.objs[(res, ns, name)] = obj
        self._event("ADDED", res, obj)
        return obj

    def _save(self, res, obj):
        obj["metadata"]["resourceVersion"] = self._bump()
        self._event("MODIFIED", res, obj)

    def init_status(self, res, obj):
        if res == "namespaces":
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        elif res == "pods":
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
            spec = obj["spec"]
            spec.setdefault("restartPolicy", "Always")
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("terminationGracePeriodSeconds", 30)
        elif res == "persistentvolumeclaims":
            spec = obj["spec"]
            meta = obj["metadata"]
            spec.setdefault("accessModes", ["ReadWriteOnce"])
            spec.setdefault("volumeMode", "Filesystem")
            spec.setdefault("storageClassName", "standard")
            spec["volumeName"] = "pvc-" + meta["uid"]
            size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
            obj["status"] = {"phase": "Bound", "accessModes": spec["accessModes"],
                             "capacity": {"storage": size}}
            os.makedirs(self.pvc_dir(obj), exist_ok=True)
        else:
            obj["status"] = {}

    def pvc_dir(self, pvc):
        return os.path.join(self.volumes, "pvc-" + pvc["metadata"]["uid"])

    def get(self, res, ns, name):
        with self.lock:
            obj = self.objs.get((res, ns, name))
            if obj is None:
                raise not_found(res, name)
            return copy.deepcopy(obj)

    def create(self, res, ns, obj):
        if res == "pods":
            self.validate_pod(obj)
        with self.lock:
            if res != "namespaces" and ("namespaces", "", ns) not in self.objs:
                raise not_found("namespaces", ns)
            out = self._create(res, ns, obj)
            if res == "pods":
                self.rt[out["metadata"]["uid"]] = {"sid": None, "main": None, "log": bytearray(),
                                                   "dirs": [], "gone": False}
                threading.Thread(target=self.start_pod, args=(ns, out["metadata"]["name"],
                                                              out["metadata"]["uid"]),
                                 daemon=True).start()
            return copy.deepcopy(out)

    def validate_pod(self, obj):
        cs = (obj.get("spec") or {}).get("containers")
        if not isinstance(cs, list) or not cs:
            raise K8sError(422, 'Pod "%s" is invalid: spec.containers: Required value' %
                           (obj.get("metadata") or {}).get("name", ""), "Invalid")
        for c in cs:
            if not isinstance(c, dict) or not c.get("name") or not c.get("image"):
                raise K8sError(422, "Pod is invalid: spec.containers: every container needs a "
                               "name and an image", "Invalid")

    def delete(self, res, ns, name):
        with self.lock:
            obj = self.objs.get((res, ns, name))
            if obj is None:
                raise not_found(res, name)
            self._delete(res, ns, name)
            obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("deletionTimestamp", now_iso())
        obj["metadata"]["deletionGracePeriodSeconds"] = 0
        return obj

    def pvc_users(self, ns, name):
        return [o["metadata"]["name"] for (r, n, _), o in self.objs.items()
                if r == "pods" and n == ns and any(
                    (v.get("persistentVolumeClaim") or {}).get("claimName") == name
                    for v in (o.get("spec") or {}).get("volumes") or [] if isinstance(v, dict))]

    def _delete(self, res, ns, name):
        obj = self.objs.get((res, ns, name))
        if obj is None:
            return
        if res == "persistentvolumeclaims" and self.pvc_users(ns, name):
            # kubernetes.io/pvc-protection: Terminating until no pod uses it (tick)
            if "deletionTimestamp" not in obj["metadata"]:
                obj["metadata"]["deletionTimestamp"] = now_iso()
                obj["metadata"]["deletionGracePeriodSeconds"] = 0
                obj["metadata"]["finalizers"] = ["kubernetes.io/pvc-protection"]
                self._save(res, obj)
            return
        del self.objs[(res, ns, name)]
        obj["metadata"]["resourceVersion"] = self._bump()
        self._event("DELETED", res, obj)
        uid = obj["metadata"]["uid"]
        if res == "pods":
            rt = self.rt.pop(uid, None)
            if rt is not None:
                rt["gone"] = True
                threading.Thread(target=self.stop_pod, args=(rt,), daemon=True).start()
        elif res == "persistentvolumeclaims":
            shutil.rmtree(self.pvc_dir(obj), ignore_errors=True)
        elif res == "namespaces":
            for key in [k for k in self.objs if k[1] == name and k[0] != "namespaces"]:
                self._delete(*key)
        for key, o in list(self.objs.items()):   # what it owns goes with it
            if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or []):
                self._delete(*key)

    def update(self, req, res, ns, name, status_only):
        with self.lock:
            cur = self.objs.get((res, ns, name))
            if cur is None:
                raise not_found(res, name)
            if req.method == "PUT":
                new = self.body(req)
                rv = (new.get("metadata") or {}).get("resourceVersion")
                if rv and rv != cur["metadata"]["resourceVersion"]:
                    raise K8sError(409, 'Operation cannot be fulfilled on %s "%s": the object '
                                   "has been modified; please apply your changes to the latest "
                                   "version and try again" % (res, name), "Conflict",
                                   {"name": name, "kind": res})
            else:
                ctype = (req.headers.get("Content-Type") or "").split(";")[0].strip()
                try:
                    patch = json.loads(req.body or b"null")
                except ValueError as e:
                    raise K8sError(400, "the patch is not JSON: %s" % e)
                if ctype == "application/json-patch+json":
                    new = json_patch(cur, patch)
                elif ctype in ("application/merge-patch+json",
                               "application/strategic-merge-patch+json",
                               "application/apply-patch+yaml"):
                    if not isinstance(patch, dict):
                        raise K8sError(400, "a merge patch must be an object")
                    new = merge_patch(cur, patch)
                else:
                    raise K8sError(415, "the body of the request was in an unknown format - "
                                   "accepted media types include: application/json-patch+json, "
                                   "application/merge-patch+json, "
                                   "application/strategic-merge-patch+json")
            if not isinstance(new, dict):
                raise K8sError(400, "the result is not an object")
            if status_only:
                cur["status"] = new.get("status", cur.get("status"))
            else:
                if res == "pods":
                    spec = new.get("spec") or {}
                    if spec != cur.get("spec"):
                        raise K8sError(422, 'Pod "%s" is invalid: spec: Forbidden: pod updates '
                                       "may not change fields other than image and "
                                       "tolerations (this fake: none)" % name, "Invalid")
                meta = new.get("metadata") or {}
                for k in ("labels", "annotations", "ownerReferences", "finalizers"):
                    if k in meta:
                        cur["metadata"][k] = meta[k]
                    else:
                        cur["metadata"].pop(k, None)
                if new.get("spec") != cur.get("spec") and res != "namespaces":
                    cur["spec"] = new.get("spec") or {}
                    cur["metadata"]["generation"] += 1
            self._save(res, cur)
            return copy.deepcopy(cur)

    # --- reading: lists, tables, watches
    def wants_table(self, req):
        return "as=Table" in (req.headers.get("Accept") or "")

    def send_obj(self, req, res, obj):
        if self.wants_table(req):
            return req.send_json(200, self.table(req, res, [obj]))
        req.send_json(200, obj)

    def list(self, req, res, ns):
        lm = label_matcher(req.arg("labelSelector"))
        fm = field_matcher(req.arg("fieldSelector"))
        if truthy(req.arg("watch")):
            return self.watch(req, res, ns, lm, fm)
        with self.lock:
            items = [copy.deepcopy(o) for (r, n, _), o in sorted(self.objs.items())
                     if r == res and (ns is None or n == ns) and
                     lm(o["metadata"].get("labels")) and fm(o)]
            rv = str(self.rv)
        meta = {"resourceVersion": rv}
        try:
            limit = int(req.arg("limit") or 0)
            start = int(req.arg("continue") or 0)
        except ValueError:
            raise K8sError(400, "limit and continue must be integers here")
        if start:
            items = items[start:]
        if limit > 0 and len(items) > limit:
            meta["continue"] = str(start + limit)
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        if self.wants_table(req):
            t = self.table(req, res, items)
            t["metadata"] = meta
            return req.send_json(200, t)
        g, v, kind, _, _, _ = RESOURCES[res]
        req.send_json(200, {"kind": kind + "List", "apiVersion": (g + "/" if g else "") + v,
                            "metadata": meta, "items": items})

    def table(self, req, res, items):
        if res == "pods":
            cols = [("Name", "name"), ("Ready", ""), ("Status", ""), ("Restarts", ""),
                    ("Age", ""), ("IP", ""), ("Node", "")]
        elif res == "persistentvolumeclaims":
            cols = [("Name", "name"), ("Status", ""), ("Volume", ""), ("Capacity", ""),
                    ("Access Modes", ""), ("StorageClass", ""), ("Age", "")]
        elif res == "sandboxes":
            cols = [("Name", "name"), ("Ready", ""), ("Replicas", ""), ("Age", "")]
        else:
            cols = [("Name", "name"), ("Age", "")]
        defs = [{"name": n, "type": "integer" if n == "Restarts" else "string", "format": f,
                 "description": n, "priority": 1 if n in ("IP", "Node") else 0}
                for n, f in cols]
        include = req.arg("includeObject") or "Metadata"
        rows = []
        for o in items:
            st, meta = o.get("status") or {}, o["metadata"]
            if res == "pods":
                css = st.get("containerStatuses") or []
                ready = sum(1 for c in css if c.get("ready"))
                n = len((o.get("spec") or {}).get("containers") or [])
                phase = st.get("phase", "Pending")
                for c in css:
                    w = (c.get("state") or {}).get("waiting")
                    if w and w.get("reason"):
                        phase = w["reason"]
                if st.get("reason"):
                    phase = st["reason"]
                cells = [meta["name"], "%d/%d" % (ready, n), phase,
                         sum(c.get("restartCount", 0) for c in css),
                         age(meta["creationTimestamp"]), st.get("podIP", "<none>"),
                         (o.get("spec") or {}).get("nodeName", "<none>")]
            elif res == "persistentvolumeclaims":
                sp = o.get("spec") or {}
                cells = [meta["name"], "Terminating" if "deletionTimestamp" in meta else
                         st.get("phase", ""), sp.get("volumeName", ""),
                         (st.get("capacity") or {}).get("storage", ""),
                         ",".join({"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX",
                                   "ReadWriteMany": "RWX"}.get(m, m)
                                  for m in sp.get("accessModes") or []),
                         sp.get("storageClassName", ""), age(meta["creationTimestamp"])]
            elif res == "sandboxes":
                ready = [c.get("status") for c in st.get("conditions") or []
                         if c.get("type") == "Ready"]
                cells = [meta["name"], ready[0] if ready else "Unknown", st.get("replicas", 0),
                         age(meta["creationTimestamp"])]
            else:
                cells = [meta["name"], age(meta["creationTimestamp"])]
            row = {"cells": cells}
            if include == "Object":
                row["object"] = o
            elif include != "None":
                row["object"] = {"kind": "PartialObjectMetadata",
                                 "apiVersion": "meta.k8s.io/v1", "metadata": meta}
            rows.append(row)
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
                "columnDefinitions": defs, "rows": rows}

    def watch(self, req, res, ns, lm, fm):
        try:
            timeout = min(300.0, float(req.arg("timeoutSeconds") or 60))
            since = int(req.arg("resourceVersion") or 0)
        except ValueError:
            raise K8sError(400, "timeoutSeconds and resourceVersion must be numbers")
        stream = req.stream(200, "application/json", framing="lines")
        with self.lock:
            if since == 0:   # a watch from now starts with what is there
                pending = [(int(o["metadata"]["resourceVersion"]), "ADDED", res,
                            copy.deepcopy(o)) for (r, n, _), o in sorted(self.objs.items())
                           if r == res]
                since = self.rv
            else:
                pending = []
        deadline = time.monotonic() + timeout
        try:
            while True:
                for rv, typ, r, o in pending:
                    if r != res or (ns is not None and o["metadata"].get("namespace") != ns):
                        continue
                    if not (lm(o["metadata"].get("labels")) and fm(o)):
                        continue
                    stream.send(fakelib.json_bytes({"type": typ, "object": o}) + b"\n")
                if time.monotonic() > deadline or self.server.shutting_down.wait(0.1):
                    break
                with self.lock:
                    pending = [e for e in self.events if e[0] > since]
                    since = self.rv
            stream.end()
        except fakelib.ClientGone:
            pass

    # --- pods: the sandbox behind each
    def pod_update(self, ns, name, uid, fn):
        """Applies fn(pod) to the live pod of that uid (none: False); saved if fn is not False."""
        with self.lock:
            pod = self.objs.get(("pods", ns, name))
            if pod is None or pod["metadata"]["uid"] != uid:
                return False
            if fn(pod) is not False:
                self._save("pods", pod)
            return True

    def unschedulable_reason(self, pod):
        sel = (pod.get("spec") or {}).get("nodeSelector") or {}
        bad = {k: v for k, v in sel.items() if NODE_LABELS.get(k) != v}
        if bad:
            return ("0/1 nodes are available: 1 node(s) didn't match Pod's node "
                    "affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is "
                    "not helpful for scheduling.")
        if not self.schedulable:
            return ("0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 "
                    "nodes are available: 1 Preemption is not helpful for scheduling.")
        with self.lock:
            for v in (pod.get("spec") or {}).get("volumes") or []:
                claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
                pvc = self.objs.get(("persistentvolumeclaims", pod["metadata"]["namespace"],
                                     claim)) if claim else None
                if claim and pvc is None:
                    return 'persistentvolumeclaim "%s" not found' % claim
                if pvc is not None and "deletionTimestamp" in pvc["metadata"]:
                    return 'persistentvolumeclaim "%s" is being deleted' % claim
        return None

    def start_pod(self, ns, name, uid):
        if self.server.shutting_down.wait(self.args.pending_seconds):
            return
        while True:   # Pending until it can be scheduled (re-checked every 0.2 s)
            with self.lock:
                pod = self.objs.get(("pods", ns, name))
                if pod is None or pod["metadata"]["uid"] != uid:
                    return
                why = self.unschedulable_reason(pod)
            if why is None:
                break

            def unsched(p, why=why):
                conds = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                          "message": why, "lastProbeTime": None,
                          "lastTransitionTime": now_iso()}]
                if [(c.get("reason"), c.get("message")) for c in p["status"].get("conditions")
                        or []] == [("Unschedulable", why)]:
                    return False
                p["status"]["conditions"] = conds
            self.pod_update(ns, name, uid, unsched)
            if self.server.shutting_down.wait(0.2):
                return
        pod = self.get("pods", ns, name)
        spec = pod["spec"]
        c0 = spec["containers"][0]
        t = now_iso()

        def scheduled(p):
            p["spec"]["nodeName"] = NODE
            p["status"].update({
                "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                                "lastTransitionTime": t}],
                "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}], "startTime": t,
                "containerStatuses": [
                    {"name": c["name"], "image": c["image"], "imageID": "", "ready": False,
                     "restartCount": 0, "started": False,
                     "state": {"waiting": {"reason": "ContainerCreating"}}}
                    for c in spec["containers"]]})
        if not self.pod_update(ns, name, uid, scheduled):
            return
        fail = self.image_fail.get(c0.get("image"))
        if fail is not None:   # the kubelet cannot pull it: Pending, for good

            def pull_failed(p, fail=fail):
                for cs in p["status"].get("containerStatuses") or []:
                    cs["state"] = {"waiting": {"reason": fail[0], "message": fail[1]}}
            self.pod_update(ns, name, uid, pull_failed)
            return
        args = ["--label", "k8s-pod=%s.%s" % (ns, name)]
        if c0.get("image") == NO_TAR_IMAGE:   # its commands find no tar on their PATH
            args += ["-v", "%s:/sbx-fake-no-tar:ro" % self.no_tar_dir()]
        if c0.get("workingDir"):
            args += ["-w", c0["workingDir"]]
        env = {e["name"]: str(e.get("value", "")) for e in c0.get("env") or []
               if isinstance(e, dict) and e.get("name") and "valueFrom" not in e}
        dirs = []
        vols = {v.get("name"): v for v in spec.get("volumes") or [] if isinstance(v, dict)}
        try:
            for c in spec["containers"]:
                for vm in c.get("volumeMounts") or []:
                    v = vols.get(vm.get("name"))
                    if v is None:
                        raise fakelib.SbxError("volume %r is not defined" % vm.get("name"))
                    if "persistentVolumeClaim" in v:
                        with self.lock:
                            pvc = self.objs.get(("persistentvolumeclaims", ns,
                                                 v["persistentVolumeClaim"].get("claimName")))
                        if pvc is None:
                            raise fakelib.SbxError("persistentvolumeclaim %r not found" %
                                                   v["persistentVolumeClaim"].get("claimName"))
                        host = self.pvc_dir(pvc)
                    elif "emptyDir" in v:
                        host = os.path.join(self.volumes, "empty-%s-%s" % (uid, vm["name"]))
                        os.makedirs(host, exist_ok=True)
                        dirs.append(host)
                    else:
                        raise fakelib.SbxError("volume %r: only persistentVolumeClaim and "
                                               "emptyDir are supported" % vm.get("name"))
                    args += ["-v", "%s:%s%s" % (host, vm["mountPath"],
                                                ":ro" if vm.get("readOnly") else "")]
            sid = self.sbx.create(env=env, args=args)
        except (fakelib.SbxError, OSError, KeyError, subprocess.TimeoutExpired) as e:
            msg = str(e).strip() or type(e).__name__

            def failed(p, msg=msg):
                for cs in p["status"].get("containerStatuses") or []:
                    cs["state"] = {"waiting": {"reason": "CreateContainerError",
                                               "message": msg}}
            self.pod_update(ns, name, uid, failed)
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)
            return
        with self.lock:
            rt = self.rt.get(uid)
            if rt is None or rt["gone"]:
                rt = None
            else:
                rt["sid"], rt["dirs"] = sid, dirs
        if rt is None:   # deleted meanwhile
            self.stop_pod({"sid": sid, "main": None, "dirs": dirs})
            return
        t = now_iso()

        def running(p):
            p["status"]["phase"] = "Running"
            p["status"]["podIP"] = "127.0.0.1"
            p["status"]["podIPs"] = [{"ip": "127.0.0.1"}]
            p["status"]["conditions"] = [
                {"type": k, "status": "True", "lastProbeTime": None, "lastTransitionTime": t}
                for k in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                          "PodScheduled")]
            for cs in p["status"]["containerStatuses"]:
                cs.update({"ready": True, "started": True, "containerID": "sbx://" + sid,
                           "state": {"running": {"startedAt": t}}})
        if not self.pod_update(ns, name, uid, running):
            return
        # the main process, once the pod says Running (its end may follow at once)
        argv = list(c0.get("command") or []) + list(c0.get("args") or [])
        if argv:
            with self.lock:
                if rt["gone"]:
                    return
                rt["main"] = self.sbx.exec(sid, argv, env=None)
            threading.Thread(target=self.run_main, args=(ns, name, uid, rt),
                             daemon=True).start()

    def no_tar_dir(self):
        """A directory of links to /usr/bin's programs but tar (made once)."""
        d = os.path.join(self.volumes, "no-tar-bin")
        with self.lock:
            if not os.path.isdir(d):
                os.makedirs(d + ".tmp", exist_ok=True)
                for n in os.listdir("/usr/bin"):
                    if n != "tar" and not os.path.lexists(os.path.join(d + ".tmp", n)):
                        os.symlink("/usr/bin/" + n, os.path.join(d + ".tmp", n))
                os.rename(d + ".tmp", d)
        return d

    def run_main(self, ns, name, uid, rt):
        ex = rt["main"]
        info = None
        for kind, val in ex.events():
            if kind in ("stdout", "stderr"):
                rt["log"] += val
                if len(rt["log"]) > (1 << 20):
                    del rt["log"][:len(rt["log"]) - (1 << 20)]
            elif kind == "end":
                info = val
        if rt["gone"] or info is None:
            return
        code = info.code if info.exited else 128 + (info.signal or 0)
        self.pod_end(ns, name, uid, "Succeeded" if code == 0 else "Failed",
                     "Completed" if code == 0 else "Error", None, code)

    def pod_end(self, ns, name, uid, phase, reason, message, code):
        t = now_iso()

        def ended(p):
            p["status"]["phase"] = phase
            if message:
                p["status"]["reason"], p["status"]["message"] = reason, message
            for c in p["status"].get("conditions") or []:
                if c["type"] in ("Ready", "ContainersReady"):
                    c.update({"status": "False", "reason": "PodCompleted",
                              "lastTransitionTime": t})
            for cs in p["status"].get("containerStatuses") or []:
                cs.update({"ready": False, "started": False, "state": {"terminated": {
                    "exitCode": code, "reason": reason, "finishedAt": t}}})
        self.pod_update(ns, name, uid, ended)

    def stop_pod(self, rt):
        ex = rt.get("main")
        if ex is not None:
            ex.terminate()
        if rt.get("sid"):
            try:
                self.sbx.rm(rt["sid"])
            except fakelib.SbxError as e:
                print("k8s fake: sbx rm -f %s: %s" % (rt["sid"], e), file=sys.stderr, flush=True)
            rt["sid"] = None
        for d in rt.get("dirs") or []:
            shutil.rmtree(d, ignore_errors=True)

    def running_pod(self, ns, name):
        """(pod, runtime) of a Running pod; K8sError otherwise."""
        with self.lock:
            pod = self.objs.get(("pods", ns, name))
            if pod is None:
                raise not_found("pods", name)
            rt = self.rt.get(pod["metadata"]["uid"])
            phase = pod["status"].get("phase")
            if phase != "Running" or rt is None or not rt["sid"]:
                if phase in ("Succeeded", "Failed"):
                    raise K8sError(400, "cannot exec into a container in a completed pod; "
                                   "current phase is %s" % phase)
                raise K8sError(400, 'pod %s is not running (phase %s): container "%s" is '
                               "waiting to start" % (name, phase, pod["spec"]["containers"][0]
                                                     ["name"]))
            return copy.deepcopy(pod), rt

    # --- pods/exec over WebSocket
    def exec(self, req, ns, name):
        pod, rt = self.running_pod(ns, name)
        if "websocket" not in (req.headers.get("Upgrade") or "").lower():
            raise K8sError(400, "Upgrade request required: this fake apiserver speaks "
                           "WebSocket only (no SPDY)")
        offered = [p.strip() for p in (req.headers.get("Sec-WebSocket-Protocol") or "")
                   .split(",") if p.strip()]
        proto = next((p for p in ("v5.channel.k8s.io", "v4.channel.k8s.io") if p in offered),
                     None)
        if proto is None:
            raise K8sError(400, "none of the offered subprotocols %s is served here "
                           "(v5.channel.k8s.io, v4.channel.k8s.io)" % offered)
        argv = req.query.get("command") or []
        if not argv:
            raise K8sError(400, "you must specify at least 1 command")
        container = req.arg("container")
        names = [c["name"] for c in pod["spec"]["containers"]]
        if container and container not in names:
            raise K8sError(400, "container %s is not valid for pod %s" % (container, name))
        want = {k: truthy(req.arg(k)) for k in ("stdin", "stdout", "stderr", "tty")}
        if want["tty"]:
            want["stderr"] = False
        if not (want["stdin"] or want["stdout"] or want["stderr"]):
            raise K8sError(400, "you must specify at least 1 of stdin, stdout, stderr")
        if pod["spec"]["containers"][0].get("image") == NO_TAR_IMAGE:
            argv = ["/usr/bin/env", "PATH=/sbx-fake-no-tar"] + list(argv)
        fault = req.fault
        ws = req.websocket(proto)
        if want["tty"]:
            ex = TtyExec(self.sbx, rt["sid"], argv, want["stdin"])
        else:
            ex = self.sbx.exec(rt["sid"], argv, stdin=want["stdin"])
        reader = threading.Thread(target=self.exec_input, args=(ws, ex, proto, want),
                                  daemon=True)
        cut = int(fault.get("frames", 1)) if fault and fault["kind"] == "ws_close" else None
        try:
            ready = 1 if want["stdout"] else 2 if want["stderr"] else 3
            ws.send_binary(bytes([ready]))
            reader.start()
            if fault is not None and fault["kind"] == "ws_ping":
                ws.ping(str(fault.get("payload", "fake-ping")).encode())
            if fault is not None and fault["kind"] == "ws_idle":
                threading.Thread(target=self.idle_cut, daemon=True,
                                 args=(ws, ex, float(fault.get("seconds", 10)))).start()
            sent = 0
            info = None
            for kind, val in ex.events():
                if kind == "end":
                    info = val
                    break
                ch = {"stdout": 1, "stderr": 2}.get(kind)
                if ch is None or not want[kind]:
                    continue
                for i in range(0, len(val), 65536):
                    ws.send_binary(bytes([ch]) + val[i:i + 65536])
                sent += 1
                if cut is not None and sent >= cut:
                    raise fakelib.ClientGone("fault ws_close")
            if cut is not None:
                raise fakelib.ClientGone("fault ws_close")
            if fault is not None and fault["kind"] == "exec_hold":
                reader.join(120)   # something holds the streams: no Status, until the client goes
                raise fakelib.ClientGone("fault exec_hold")
            ws.send_binary(b"\x03" + fakelib.json_bytes(self.exec_status(info, fault, argv[0])))
            ws.close(1000)
            reader.join(2)   # the client's close, briefly
        except fakelib.ClientGone:
            ws.abort()
            if cut is not None:   # the fault ends the command
                ex.terminate()
            elif not ex.done:     # as a kubelet: the command runs on, its output dropped
                threading.Thread(target=self.drain, args=(ex,), daemon=True).start()
        finally:
            with self.lock:
                self.pongs += [p.decode("utf-8", "replace") for p in ws.pongs]

    @staticmethod
    def idle_cut(ws, ex, seconds):
        """As a proxy or load balancer that ends idle connections: the WebSocket is cut once
        the client sent nothing (not even a ping) for seconds."""
        while not ex.done and not ws.gone:
            if time.monotonic() - ws.last_in > seconds:
                ws.abort()
                return
            time.sleep(0.2)

    @staticmethod
    def drain(ex):
        for kind, _ in ex.events():
            if kind == "end":
                return

    @staticmethod
    def exec_status(info, fault, argv0):
        if fault is not None and fault["kind"] == "no_exit_code":
            return {"metadata": {}, "status": "Failure",
                    "message": "command terminated with non-zero exit code",
                    "reason": "NonZeroExitCode"}
        if info.error:   # as runc words it
            e = info.error.lower()
            if "no such file" in e or "not found" in e:
                why = ("stat %s: no such file or directory" % argv0 if "/" in argv0
                       else "executable file not found in $PATH")
            elif "permission denied" in e:
                why = "permission denied"
            else:
                why = info.error
            msg = ("Internal error occurred: error executing command in container: failed to "
                   "exec in container: failed to start exec: OCI runtime exec failed: exec "
                   "failed: unable to start container process: exec: %s: %s: unknown" %
                   (json.dumps(argv0), why))
            return {"metadata": {}, "status": "Failure", "message": msg,
                    "reason": "InternalError", "details": {"causes": [{"message": msg}]},
                    "code": 500}
        code = info.code if info.exited else 128 + (info.signal or 0)
        if code == 0:
            return {"metadata": {}, "status": "Success"}
        return {"metadata": {}, "status": "Failure",
                "message": "command terminated with non-zero exit code: exit status %d" % code,
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}

    @staticmethod
    def exec_input(ws, ex, proto, want):
        """The client's frames: stdin (0), v5's close of stdin (ff 00), resize (4), close."""
        while True:
            m = ws.recv()
            if m is None:   # the client went: its command runs on (a kubelet's way)
                return
            op, data = m
            if op == 8:
                return
            if not data:
                continue
            ch, data = data[0], data[1:]
            try:
                if ch == 0 and want["stdin"]:
                    if data:
                        ex.write(data)
                elif ch == 255 and proto.startswith("v5") and data[:1] == b"\x00":
                    ex.close_stdin()
                elif ch == 4 and want["tty"]:
                    size = json.loads(data or b"{}")
                    ex.resize(int(size.get("Width", 80)), int(size.get("Height", 24)))
            except (OSError, ValueError, AttributeError):
                pass

    # --- pods/proxy and pods/log
    def proxy(self, req, ns, name_port, rest):
        name, _, port = name_port.partition(":")
        if port.startswith("http:"):
            port = port[5:]
        port = port or "80"
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise K8sError(400, "invalid port %r" % port)
        _, rt = self.running_pod(ns, name)
        path = urllib.parse.quote(rest, safe="/%:@!$&'()*+,;=-._~") or "/"
        if req.query_string:
            path += "?" + req.query_string
        body = req.body if req.method in ("POST", "PUT", "PATCH") else b""
        head = ["%s %s HTTP/1.1" % (req.method, path), "Host: 127.0.0.1:%s" % port,
                "Connection: close", "Content-Length: %d" % len(body)]
        # the client's headers go on, but the apiserver's own credentials and the hop's
        for h, v in req.headers.items():
            if h.lower() not in ("authorization", "host", "connection", "content-length",
                                 "transfer-encoding", "upgrade", "keep-alive",
                                 "proxy-authorization", "te", "expect"):
                head.append("%s: %s" % (h, v))
        raw = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        try:
            r = self.sbx.cmd(["exec", "-i", rt["sid"], "--", "/usr/bin/python3", "-c",
                              _FORWARD, port], input=raw, timeout=60)
        except subprocess.TimeoutExpired:
            raise K8sError(504, "the pod's port %s did not answer in time" % port)
        if r.returncode != 0 or not r.stdout:
            why = r.stderr.decode("utf-8", "replace").strip().splitlines()
            raise K8sError(503, "error trying to reach service: %s" %
                           (why[-1] if why else "no answer from port %s" % port))
        out = r.stdout
        hend = out.find(b"\r\n\r\n")
        if hend < 0 or not out.startswith(b"HTTP/"):
            raise K8sError(502, "the pod's port %s did not answer HTTP" % port)
        lines = out[:hend].decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            raise K8sError(502, "bad status line from the pod: %r" % lines[0])
        headers, cookies = {}, []
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
            if k.strip().lower() == "set-cookie":
                cookies.append(v.strip())
        data = out[hend + 4:]
        if "chunked" in headers.get("transfer-encoding", "").lower():
            data = dechunk(data)
        elif headers.get("content-length", "").isdigit():
            data = data[:int(headers["content-length"])]
        keep = {k: headers[k] for k in ("cache-control", "etag", "last-modified",
                                        "content-encoding", "content-disposition")
                if k in headers}
        if cookies:
            keep["Set-Cookie"] = cookies
        loc = headers.get("location")
        if loc:   # as the apiserver's proxy rewrites it: the pod's "/x" is its own URL
            if loc.startswith("/"):
                loc = "https://127.0.0.1:%d/api/v1/namespaces/%s/pods/%s/proxy%s" % (
                    self.server.port, ns, name_port, loc)
            keep["Location"] = loc
        req.send(status, data, headers.get("content-type"), keep)

    def log(self, req, ns, name):
        with self.lock:
            pod = self.objs.get(("pods", ns, name))
            if pod is None:
                raise not_found("pods", name)
            rt = self.rt.get(pod["metadata"]["uid"])
            data = bytes(rt["log"]) if rt else b""
        if pod["status"].get("phase") == "Pending":
            raise K8sError(400, 'container "%s" in pod "%s" is waiting to start: '
                           "ContainerCreating" % (pod["spec"]["containers"][0]["name"], name))
        req.send(200, data, "text/plain")

    # --- the agent-sandbox controller, and pods waiting to be scheduled
    def tick(self):
        with self.lock:
            for (r, ns, name), o in list(self.objs.items()):
                if r == "persistentvolumeclaims" and "deletionTimestamp" in o["metadata"] \
                        and not self.pvc_users(ns, name):
                    self._delete(r, ns, name)
        self.reconcile()

    def reconcile(self):
        if not self.agents:
            return
        with self.lock:
            for key, pool in list(self.objs.items()):
                if key[0] == "sandboxwarmpools" and key in self.objs:
                    self.reconcile_pool(key[1], pool)
            for key, claim in list(self.objs.items()):
                if key[0] == "sandboxclaims" and key in self.objs:
                    self.reconcile_claim(key[1], claim)
            for key, sb in list(self.objs.items()):
                if key[0] == "sandboxes" and key in self.objs:
                    self.reconcile_sandbox(key[1], sb)

    @staticmethod
    def owner(obj):
        return [{"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                 "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
                 "controller": True, "blockOwnerDeletion": True}]

    def set_status(self, res, obj, status):
        if obj.get("status") != status:
            obj["status"] = status
            self._save(res, obj)

    def sandbox_spec(self, tmpl, env=None):
        """A Sandbox's spec from a SandboxTemplate (env: a claim's, injected)."""
        spec = copy.deepcopy(tmpl.get("spec") or {})
        out = {k: spec[k] for k in ("podTemplate", "volumeClaimTemplates") if k in spec}
        if env:
            for c in ((out.get("podTemplate") or {}).get("spec") or {}).get("containers") or []:
                have = c.setdefault("env", [])
                for e in env:
                    if e.get("containerName") in (None, "", c.get("name")):
                        have[:] = [v for v in have if v.get("name") != e.get("name")]
                        have.append({"name": e.get("name"), "value": e.get("value", "")})
        return out

    def adopt(self, ns, claim, tname):
        """A ready Sandbox of a warm pool whose template is tname (the claim's warmpool policy
        allowing), handed to the claim as the controller does; None when there is none."""
        spec = claim.get("spec") or {}
        policy = spec.get("warmpool") or "default"
        if policy == "none" or spec.get("env"):
            return None   # env: always a cold start, from the template
        pools = [p for (r, n, pn), p in sorted(self.objs.items())
                 if r == "sandboxwarmpools" and n == ns and
                 ((p.get("spec") or {}).get("sandboxTemplateRef") or {}).get("name") == tname and
                 policy in ("default", pn)]
        for pool in pools:
            for (r, n, sname), sb in sorted(self.objs.items()):
                if r != "sandboxes" or n != ns or not self.owned_by(sb, pool):
                    continue
                ready = [c for c in (sb.get("status") or {}).get("conditions") or []
                         if c.get("type") == "Ready" and c.get("status") == "True"]
                if not ready:
                    continue
                meta = sb["metadata"]
                meta.setdefault("labels", {}).pop(WARM_LABEL, None)
                meta["labels"]["agents.x-k8s.io/claim-uid"] = claim["metadata"]["uid"]
                meta.setdefault("annotations", {})[POD_NAME_ANNOTATION] = sname
                meta["ownerReferences"] = self.owner(claim)
                self._save("sandboxes", sb)
                return sb
        return None

    @staticmethod
    def owned_by(obj, owner):
        return any(r.get("uid") == owner["metadata"]["uid"]
                   for r in obj["metadata"].get("ownerReferences") or [])

    def reconcile_pool(self, ns, pool):
        """Keeps spec.replicas Sandboxes of the pool's template, named POOL-xxxxx."""
        spec = pool.get("spec") or {}
        tname = (spec.get("sandboxTemplateRef") or {}).get("name")
        tmpl = self.objs.get(("sandboxtemplates", ns, tname))
        mine = [sb for (r, n, _), sb in sorted(self.objs.items())
                if r == "sandboxes" and n == ns and self.owned_by(sb, pool)]
        want = int(spec.get("replicas") or 0)
        while tmpl is not None and len(mine) < want:
            body = {"metadata": {"generateName": pool["metadata"]["name"] + "-",
                                 "ownerReferences": self.owner(pool),
                                 "labels": {WARM_LABEL: pool["metadata"]["name"]}},
                    "spec": self.sandbox_spec(tmpl)}
            mine.append(self._create("sandboxes", ns, body))
        for sb in mine[want:]:
            self._delete("sandboxes", ns, sb["metadata"]["name"])
        ready = sum(1 for sb in mine[:want] for c in (sb.get("status") or {}).get("conditions")
                    or [] if c.get("type") == "Ready" and c.get("status") == "True")
        self.set_status("sandboxwarmpools", pool, {"replicas": min(len(mine), want),
                                                   "readyReplicas": ready})

    def reconcile_claim(self, ns, claim):
        spec = claim.get("spec") or {}
        tname = (spec.get("sandboxTemplateRef") or {}).get("name")
        name = claim["metadata"]["name"]
        tmpl = self.objs.get(("sandboxtemplates", ns, tname))
        st = dict(claim.get("status") or {})
        sname = (st.get("sandbox") or {}).get("name")
        sb = self.objs.get(("sandboxes", ns, sname)) if sname else None
        life = spec.get("lifecycle") or {}
        t = parse_time(life.get("shutdownTime")) if life.get("shutdownTime") else None
        expired = t is not None and t <= time.time()
        if expired and life.get("shutdownPolicy") in ("Delete", "DeleteForeground"):
            self._delete("sandboxclaims", ns, name)
            return
        cond = None
        if expired:   # Retain: the claim stays, what it had goes
            if sb is not None:
                self._delete("sandboxes", ns, sname)
                sb = None
            cond = {"type": "Ready", "status": "False", "reason": "ClaimExpired",
                    "message": "Claim expired. Sandbox cleanup initiated."}
        elif sb is None and tmpl is not None and not sname:
            env = spec.get("env")
            policy = (tmpl.get("spec") or {}).get("envVarsInjectionPolicy") or "Disallowed"
            if env and policy not in ("Allowed", "Overrides"):
                cond = {"type": "Ready", "status": "False", "reason": "EnvVarsInjectionRejected",
                        "message": "environment variable injection is not allowed by the "
                        "template policy"}
            else:
                sb = self.adopt(ns, claim, tname)
                if sb is None:
                    body = {"metadata": {"name": name, "ownerReferences": self.owner(claim),
                                         "labels": {"agents.x-k8s.io/claim-uid":
                                                    claim["metadata"]["uid"]}},
                            "spec": self.sandbox_spec(tmpl, env)}
                    try:
                        sb = self._create("sandboxes", ns, body)
                    except K8sError:
                        sb = None
        if cond is not None:
            pass
        elif sb is None:
            cond = {"type": "Ready", "status": "False",
                    "reason": "TemplateNotFound" if tmpl is None and not sname
                    else "SandboxMissing",
                    "message": 'SandboxTemplate "%s" not found' % tname
                    if tmpl is None and not sname else "the sandbox is gone"}
        else:
            st["sandbox"] = {"name": sb["metadata"]["name"]}
            ready = [c for c in (sb.get("status") or {}).get("conditions") or []
                     if c.get("type") == "Ready"]
            cond = dict(ready[0]) if ready else {"type": "Ready", "status": "False",
                                                 "reason": "DependenciesNotReady",
                                                 "message": "the sandbox is being created"}
        old = [c for c in st.get("conditions") or [] if c.get("type") == "Ready"]
        if old and (old[0].get("status"), old[0].get("reason")) == (cond["status"],
                                                                    cond.get("reason")):
            cond["lastTransitionTime"] = old[0].get("lastTransitionTime")
        else:
            cond["lastTransitionTime"] = now_iso()
        st["conditions"] = [cond]
        self.set_status("sandboxclaims", claim, st)

    def reconcile_sandbox(self, ns, sb):
        spec, name = sb.get("spec") or {}, sb["metadata"]["name"]
        expired = False
        if spec.get("shutdownTime"):
            t = parse_time(spec["shutdownTime"])
            expired = t is not None and t <= time.time()
        if expired and spec.get("shutdownPolicy") == "Delete":
            self._delete("sandboxes", ns, name)
            return
        want = 0 if expired else spec.get("replicas", 1)
        claims = []
        for vct in spec.get("volumeClaimTemplates") or []:
            vname = (vct.get("metadata") or {}).get("name")
            if not vname:
                continue
            cname = "%s-%s" % (vname, name)
            claims.append((vname, cname))
            if ("persistentvolumeclaims", ns, cname) not in self.objs:
                try:
                    self._create("persistentvolumeclaims", ns, {
                        "metadata": {"name": cname, "ownerReferences": self.owner(sb),
                                     "labels": {"agents.x-k8s.io/sandbox-name": name}},
                        "spec": copy.deepcopy(vct.get("spec") or {})})
                except K8sError:
                    pass
        pod = self.objs.get(("pods", ns, name))
        if pod is not None and not any(r.get("uid") == sb["metadata"]["uid"] for r in
                                       pod["metadata"].get("ownerReferences") or []):
            pod = None   # a pod of that name not ours: leave it
        elif want == 1 and pod is None:
            tmpl = copy.deepcopy(spec.get("podTemplate") or {})
            pspec = tmpl.get("spec") or {}
            vols = pspec.setdefault("volumes", [])
            for vname, cname in claims:
                if not any(v.get("name") == vname for v in vols):
                    vols.append({"name": vname, "persistentVolumeClaim": {"claimName": cname}})
            labels = dict((tmpl.get("metadata") or {}).get("labels") or {})
            labels["agents.x-k8s.io/sandbox-name"] = name
            body = {"metadata": {"name": name, "labels": labels,
                                 "annotations": (tmpl.get("metadata") or {}).get("annotations")
                                 or {}, "ownerReferences": self.owner(sb)}, "spec": pspec}
            try:
                self.validate_pod(body)
                pod = self.create("pods", ns, body)
            except K8sError as e:
                self.set_status("sandboxes", sb, {"replicas": 0, "conditions": [
                    {"type": "Ready", "status": "False", "reason": "PodInvalid",
                     "message": e.message, "lastTransitionTime": now_iso()}]})
                return
        elif want == 0 and pod is not None:
            self._delete("pods", ns, name)
            pod = None
        ready = pod is not None and pod["status"].get("phase") == "Running"
        if expired:
            cond = ("False", "SandboxExpired", "the sandbox's shutdownTime has passed")
        elif ready:
            cond = ("True", "DependenciesReady", "the pod is ready")
        elif want == 0:
            cond = ("False", "DependenciesNotReady", "replicas is 0")
        else:
            cond = ("False", "DependenciesNotReady", "the pod is not ready")
        old = [c for c in (sb.get("status") or {}).get("conditions") or []
               if c.get("type") == "Ready"]
        ltt = old[0].get("lastTransitionTime") if old and (old[0].get("status"),
                                                           old[0].get("reason")) == cond[:2] \
            else now_iso()
        st = {"replicas": 1 if pod is not None else 0,
              "selector": "agents.x-k8s.io/sandbox-name=" + name,
              "service": name, "serviceFQDN": "%s.%s.svc.cluster.local" % (name, ns),
              "conditions": [{"type": "Ready", "status": cond[0], "reason": cond[1],
                              "message": cond[2], "observedGeneration":
                              sb["metadata"]["generation"], "lastTransitionTime": ltt}]}
        if ready:
            st["podIPs"] = ["127.0.0.1"]
        self.set_status("sandboxes", sb, st)

    # --- control, state, shutdown
    def control(self, req):
        if req.path == "/_fake/k8s/schedulable" and req.method == "POST":
            doc = req.json()
            if not isinstance(doc, dict) or not isinstance(doc.get("schedulable"), bool):
                raise HTTPError(400, 'want {"schedulable": true|false}')
            self.schedulable = doc["schedulable"]
            return req.send_json(200, {"ok": True})
        if req.path == "/_fake/k8s/image-fail" and req.method == "POST":
            doc = req.json()
            if not isinstance(doc, dict) or not doc.get("image") or doc.get("reason") not in (
                    "ErrImagePull", "ImagePullBackOff", "InvalidImageName", None):
                raise HTTPError(400, 'want {"image", "reason": ErrImagePull|ImagePullBackOff|'
                                'InvalidImageName|null, "message"?}')
            if doc.get("reason") is None:
                self.image_fail.pop(doc["image"], None)
            else:
                self.image_fail[doc["image"]] = (doc["reason"], doc.get("message") or "")
            return req.send_json(200, {"ok": True})
        if req.path == "/_fake/k8s/pod-phase" and req.method == "POST":
            doc = req.json()
            if not isinstance(doc, dict) or doc.get("phase") not in ("Failed", "Succeeded"):
                raise HTTPError(400, 'want {"namespace", "name", "phase": "Failed"|"Succeeded"}')
            ns, name = doc.get("namespace") or "default", doc.get("name")
            with self.lock:
                pod = self.objs.get(("pods", ns, name))
                if pod is None:
                    raise HTTPError(404, "no pod %s/%s" % (ns, name))
                uid = pod["metadata"]["uid"]
                rt = self.rt.get(uid)
            if rt is not None:
                rt["gone"] = True
                self.stop_pod(rt)
            self.pod_end(ns, name, uid, doc["phase"], doc.get("reason") or "Evicted",
                         doc.get("message") or "ended through the fake's control API",
                         0 if doc["phase"] == "Succeeded" else 137)
            return req.send_json(200, {"ok": True})
        raise HTTPError(404, "no control route %s %s" % (req.method, req.path))

    def state(self):
        with self.sbx.lock:
            backing = sorted(self.sbx.created)
        with self.lock:
            def names(res):
                return sorted("%s/%s" % (k[1], k[2]) for k in self.objs if k[0] == res)
            pods = {}
            for (r, ns, name), o in self.objs.items():
                if r == "pods":
                    rt = self.rt.get(o["metadata"]["uid"]) or {}
                    pods["%s/%s" % (ns, name)] = {"phase": o["status"].get("phase"),
                                                  "sandbox": rt.get("sid")}
            return {"pods": pods, "pvcs": names("persistentvolumeclaims"),
                    "sandboxes": names("sandboxes"), "claims": names("sandboxclaims"),
                    "warmpools": names("sandboxwarmpools"), "backing": backing,
                    "pongs": list(self.pongs)}

    def close(self):
        with self.lock:
            rts = list(self.rt.values())
            for rt in rts:
                rt["gone"] = True
        for rt in rts:
            self.stop_pod(rt)
        shutil.rmtree(self.volumes, ignore_errors=True)


class TtyExec:
    """`sbx exec -t` on a pseudo-terminal: the Exec interface with one output stream."""

    def __init__(self, sbx, sid, argv, stdin):
        self.master, slave = pty.openpty()
        a = [sbx.path, "exec", "-t"] + (["-i"] if stdin else []) + [sid, "--"] + list(argv)

        def ctty():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        self.proc = subprocess.Popen(a, env=sbx.env, stdin=slave, stdout=slave, stderr=slave,
                                     preexec_fn=ctty, close_fds=True)
        os.close(slave)
        self.done = False
        self.info = None

    def events(self):
        while True:
            try:
                b = os.read(self.master, 65536)
            except OSError:
                b = b""
            if not b:
                break
            yield "stdout", b
        rc = self.proc.wait()
        self.done = True
        os.close(self.master)
        if rc > 128:
            self.info = fakelib.ExitInfo(rc, sig=rc - 128)
        else:
            self.info = fakelib.ExitInfo(rc, exited=True, code=rc)
        yield "end", self.info

    def write(self, data):
        os.write(self.master, data)

    def close_stdin(self):
        os.write(self.master, b"\x04")

    def resize(self, cols, rows):
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def terminate(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def dechunk(data):
    out, i = [], 0
    while i < len(data):
        j = data.find(b"\r\n", i)
        if j < 0:
            break
        try:
            n = int(data[i:j].split(b";")[0].strip() or b"0", 16)
        except ValueError:
            break
        if n == 0:
            break
        out.append(data[j + 2:j + 2 + n])
        i = j + 2 + n + 2
    return b"".join(out)


if __name__ == "__main__":
    fakelib.run(Kube)
