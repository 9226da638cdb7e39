#!/usr/bin/python3
"""Builds the image tests' OCI images: OCI-layout directories, OCI-layout tars and docker-save
tars, from a preset or a JSON spec. Deterministic: the same spec gives the same digests
(mtime 1700000000, uid/gid 0, gzip without a timestamp), so images share their base layer.

Usage: mkimage.py --out PATH [--format oci|oci-archive|docker-archive|docker-archive-oci]
                  [--tag TAG] [--name NAME:TAG] [--no-ref-name]
                  (--preset NAME [--arg VALUE] | --spec FILE.json)
  oci                 an OCI-layout directory; several runs may add tags to the same one
                      (ref.name is the TAG, as skopeo's oci:DIR:TAG wants)
  oci-archive         a tar of an OCI layout; ref.name is --name when given (else TAG), and
                      io.containerd.image.name is --name; --no-ref-name: no name at all
  docker-archive      `docker save` before Docker 25: manifest.json, <id>.json, <v1id>/layer.tar
  docker-archive-oci  `docker save` from Docker 25 on: an OCI layout plus manifest.json
Prints one JSON object on stdout: {"id": "sha256:<config>", "manifest": "sha256:..",
"index": "sha256:.." or null, "layers": [blob digests, base first], "diff_ids": [...],
"size": bytes of config + layers, "platforms": {"linux/amd64": {"id", "manifest",
"layers"}, ...} for an index}.

A spec: {"config": {...}, "layers": [LAYER...], "platforms": ["linux/amd64", ...]}
  config   the image config's "config" (Env, WorkingDir, User, Entrypoint, Cmd...), over
           the default {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
  LAYER    {"compression": "gzip"|"zstd"|"none", "entries": [ENTRY...]}
  ENTRY    {"type": "busybox"} (a busybox-static root file system: /bin/busybox and its applet
           links, /etc/passwd with root and app (1000), /tmp 1777, ...), or
           {"type": "file"|"dir"|"symlink"|"hardlink"|"char"|"block"|"fifo", "path": P,
            "data": TEXT, "size": N (N bytes of a repeating pattern instead of data),
            "mode": "0755" or int, "target": LINK TARGET, "major": M, "minor": N,
            "uid": U, "gid": G, "pax": {RECORD: TEXT or {"hex": BYTES}}}, or
           {"type": "whiteout", "path": P}  (P's parent/.wh.NAME), {"type": "opaque",
            "path": DIR} (DIR/.wh..wh..opq)
  platforms  makes an image index: one manifest per platform, each with one more layer
           holding /etc/sbx-arch = "OS/ARCH[/VARIANT]", plus a buildkit-style attestation
           manifest (platform unknown/unknown) that a client must skip.
Presets: busybox, app (4 layers: whiteouts, an opaque directory, a zstd layer when the zstd
command exists, Env/WorkingDir/User/Entrypoint/Cmd), multiarch, big (--arg BYTES: one layer
of incompressible data), many (--arg N layers, default 50: /layers/001 ...). Awkward but
fine: quirks (PAX xattrs with security.capability, a hard link within a layer, an absolute
symlink, a duplicate entry, long and UTF-8 names, a file over a lower layer's symlink; User
"app" by name, a WorkingDir the image lacks) and crosslink (lib -> usr/lib in one layer,
lib/marker in the next). Hostile (busybox + one bad layer): escape (../escape), abs
(/abs/evil-abs), symlink (link -> --arg DIR, then link/evil), symlink-rel (rlink ->
../../../../../../.. then rlink/tmp/evil-rel), hardlink (h -> ../ 16 times, then etc/passwd),
hardlink-abs (h -> /etc/passwd), device (a char device), setuid (a 4755 file and a 2755
one), bigowner (a file owned by uid 70000).
Python standard library only (zstd layers need the zstd command).
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

MTIME = 1700000000
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_TYPES = {"gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
               "zstd": "application/vnd.oci.image.layer.v1.tar+zstd",
               "none": "application/vnd.oci.image.layer.v1.tar"}
DEFAULT_ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
APPLETS = ["sh", "ash", "ls", "cat", "echo", "id", "env", "pwd", "mkdir", "rm", "rmdir",
           "touch", "test", "[", "true", "false", "sleep", "stat", "readlink", "wc", "head",
           "tail", "grep", "sed", "printf", "whoami", "ln", "cp", "mv", "chmod", "find", "du",
           "tr", "uname", "hostname", "ps", "kill", "basename", "dirname", "sort", "cut",
           "mount", "df", "date", "tee", "xargs", "vi", "awk", "which", "sha256sum", "md5sum",
           "dd", "chown", "mknod", "su", "seq", "wget", "hexdump", "od", "cmp"]


def busybox_path():
    for p in ("/bin/busybox", "/usr/bin/busybox"):
        if os.path.exists(p):
            return p
    sys.exit("mkimage: no busybox (apt-get install busybox-static)")


def mode_of(e, default):
    m = e.get("mode", default)
    return int(m, 8) if isinstance(m, str) else m


def expand(entries):
    """the entries, with busybox, whiteout and opaque turned into plain ones"""
    out = []
    for e in entries:
        t = e["type"]
        if t == "busybox":
            for d, m in (("bin", 0o755), ("etc", 0o755), ("root", 0o700), ("tmp", 0o1777),
                         ("usr", 0o755), ("usr/bin", 0o755), ("usr/local", 0o755),
                         ("usr/local/bin", 0o755), ("home", 0o755), ("home/app", 0o755),
                         ("var", 0o755), ("dev", 0o755), ("proc", 0o755), ("sys", 0o755)):
                out.append({"type": "dir", "path": d, "mode": m,
                            "uid": 1000 if d == "home/app" else 0,
                            "gid": 1000 if d == "home/app" else 0})
            out.append({"type": "file", "path": "bin/busybox", "mode": 0o755,
                        "bytes": open(busybox_path(), "rb").read()})
            for a in APPLETS:
                out.append({"type": "symlink", "path": "bin/" + a, "target": "busybox"})
            out.append({"type": "file", "path": "etc/passwd", "mode": 0o644,
                        "data": "root:x:0:0:root:/root:/bin/sh\n"
                                "app:x:1000:1000:app:/home/app:/bin/sh\n"
                                "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"})
            out.append({"type": "file", "path": "etc/group", "mode": 0o644,
                        "data": "root:x:0:\napp:x:1000:\nnogroup:x:65534:\n"})
            out.append({"type": "file", "path": "etc/os-release", "mode": 0o644,
                        "data": "ID=sbx-test-busybox\n"})
        elif t == "whiteout":
            d, n = os.path.split(e["path"].strip("/"))
            out.append({"type": "file", "path": os.path.join(d, ".wh." + n), "mode": 0o644})
        elif t == "opaque":
            out.append({"type": "file", "path": e["path"].strip("/") + "/.wh..wh..opq",
                        "mode": 0o644})
        else:
            out.append(e)
    return out


def pattern(n):
    """n bytes that do not compress (a SHA-256 chain), the same every time"""
    out, h, seed = bytearray(), b"", b"sbx-test"
    while len(out) < n:
        h = hashlib.sha256(seed + h).digest()
        out += h
    return bytes(out[:n])


def layer_tar(entries):
    """the uncompressed tar of a layer, bytes"""
    buf = io.BytesIO()
    t = tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
    kinds = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
             "hardlink": tarfile.LNKTYPE, "char": tarfile.CHRTYPE, "block": tarfile.BLKTYPE,
             "fifo": tarfile.FIFOTYPE}
    for e in expand(entries):
        i = tarfile.TarInfo(e["path"])
        i.type = kinds[e["type"]]
        i.mtime = e.get("mtime", MTIME)
        i.uid, i.gid = e.get("uid", 0), e.get("gid", 0)
        i.uname = i.gname = ""
        if "pax" in e:  # PAX records; bytes given in hex as {"hex": "..."}
            i.pax_headers = {k: bytes.fromhex(v["hex"]).decode("utf-8", "surrogateescape")
                             if isinstance(v, dict) else v for k, v in e["pax"].items()}
        data = None
        if e["type"] == "file":
            if "bytes" in e:
                data = e["bytes"]
            elif "size" in e:
                data = pattern(e["size"])
            else:
                data = e.get("data", "").encode()
            i.size = len(data)
            i.mode = mode_of(e, 0o644)
        elif e["type"] == "dir":
            i.mode = mode_of(e, 0o755)
        elif e["type"] in ("symlink", "hardlink"):
            i.linkname = e["target"]
            i.mode = mode_of(e, 0o777 if e["type"] == "symlink" else 0o644)
        else:
            i.devmajor, i.devminor = e.get("major", 0), e.get("minor", 0)
            i.mode = mode_of(e, 0o666)
        t.addfile(i, io.BytesIO(data) if data is not None else None)
    t.close()
    return buf.getvalue()


def compress(raw, how):
    if how == "none":
        return raw
    if how == "gzip":
        out = io.BytesIO()
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as g:
            g.write(raw)
        return out.getvalue()
    if how == "zstd":
        return subprocess.run(["zstd", "-q", "-c", "-3", "--no-check"], input=raw,
                              stdout=subprocess.PIPE, check=True).stdout
    sys.exit("mkimage: unknown compression %r" % how)


def canon(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


class Layout:
    """blobs written once into a blobs/sha256/ tree"""

    def __init__(self, root):
        self.root = root
        os.makedirs(os.path.join(root, "blobs", "sha256"), exist_ok=True)

    def put(self, data):
        d = sha(data)
        p = os.path.join(self.root, "blobs", "sha256", d[7:])
        if not os.path.exists(p):
            with open(p + ".tmp", "wb") as f:
                f.write(data)
            os.rename(p + ".tmp", p)
        return d


def build_image(lay, spec, os_arch, extra_layers=(), uncompressed=False):
    """writes one image's blobs; returns (manifest descriptor, info)"""
    parts = os_arch.split("/")
    layers, diff_ids, descs, size = [], [], [], 0
    for L in list(spec.get("layers", [])) + list(extra_layers):
        raw = layer_tar(L["entries"])
        how = "none" if uncompressed else L.get("compression", "gzip")
        if how == "zstd" and not shutil.which("zstd"):
            how = "gzip"
        blob = compress(raw, how)
        d = lay.put(blob)
        layers.append(d)
        diff_ids.append(sha(raw))
        descs.append({"mediaType": LAYER_TYPES[how], "digest": d, "size": len(blob)})
        size += len(blob)
    cfg = {"Env": list(DEFAULT_ENV)}
    cfg.update(spec.get("config", {}))
    config = {"created": "2023-11-14T22:13:20Z", "architecture": parts[1], "os": parts[0],
              "config": cfg, "rootfs": {"type": "layers", "diff_ids": diff_ids},
              "history": [{"created": "2023-11-14T22:13:20Z", "created_by": "mkimage.py"}
                          for _ in diff_ids]}
    if len(parts) > 2:
        config["variant"] = parts[2]
    cblob = canon(config)
    cd = lay.put(cblob)
    size += len(cblob)
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": {"mediaType": OCI_CONFIG, "digest": cd, "size": len(cblob)},
                "layers": descs}
    mblob = canon(manifest)
    md = lay.put(mblob)
    desc = {"mediaType": OCI_MANIFEST, "digest": md, "size": len(mblob)}
    return desc, {"id": cd, "manifest": md, "layers": layers, "diff_ids": diff_ids,
                  "size": size, "config_path": "blobs/sha256/" + cd[7:]}


def platform_obj(os_arch):
    p = os_arch.split("/")
    o = {"os": p[0], "architecture": p[1]}
    if len(p) > 2:
        o["variant"] = p[2]
    return o


def build(lay, spec, uncompressed=False):
    """(descriptor to name in index.json, info)"""
    plats = spec.get("platforms")
    if not plats:
        return build_image(lay, spec, "linux/amd64", uncompressed=uncompressed)
    manifests, info = [], {"platforms": {}}
    for p in plats:
        marker = {"compression": "gzip", "entries": [
            {"type": "file", "path": "etc/sbx-arch", "data": p + "\n"}]}
        desc, i = build_image(lay, spec, p, [marker], uncompressed)
        desc = dict(desc, platform=platform_obj(p))
        manifests.append(desc)
        info["platforms"][p] = i
    # buildkit's attestation manifest: platform unknown/unknown, to be skipped
    att = {"compression": "gzip", "entries": [
        {"type": "file", "path": "sbom.json", "data": "{}"}]}
    adesc, _ = build_image(lay, {"layers": [att]}, "unknown/unknown")
    first = manifests[0]["digest"]
    manifests.append(dict(adesc, platform={"os": "unknown", "architecture": "unknown"},
                          annotations={"vnd.docker.reference.type": "attestation-manifest",
                                       "vnd.docker.reference.digest": first}))
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
    iblob = canon(index)
    idig = lay.put(iblob)
    main = info["platforms"][plats[0]]
    info.update({"id": main["id"], "manifest": main["manifest"], "layers": main["layers"],
                 "diff_ids": main["diff_ids"], "size": main["size"], "index": idig})
    return {"mediaType": OCI_INDEX, "digest": idig, "size": len(iblob)}, info


def add_ref(root, desc, annotations):
    """adds desc to root/index.json (replacing one of the same ref.name) and oci-layout"""
    with open(os.path.join(root, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
    p = os.path.join(root, "index.json")
    idx = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}
    if os.path.exists(p):
        idx = json.load(open(p))
    name = annotations.get("org.opencontainers.image.ref.name")
    idx["manifests"] = [m for m in idx["manifests"]
                        if name is None or
                        m.get("annotations", {}).get("org.opencontainers.image.ref.name") != name]
    d = dict(desc)
    if annotations:
        d["annotations"] = annotations
    idx["manifests"].append(d)
    with open(p, "w") as f:
        json.dump(idx, f)


def write_tar(src, out):
    """a tar of the directory src's contents, deterministic order, written to out"""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames.sort()
            for n in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, n)
                arc = os.path.relpath(full, src)
                i = t.gettarinfo(full, arc)
                i.uid = i.gid = 0
                i.uname = i.gname = ""
                i.mtime = MTIME
                if i.isreg():
                    with open(full, "rb") as f:
                        t.addfile(i, f)
                else:
                    t.addfile(i)


def docker_archive(tmp, info, name, oci_style):
    """manifest.json (and repositories) for a docker save tar in tmp"""
    if oci_style:
        entry = {"Config": info["config_path"],
                 "RepoTags": [name] if name else [],
                 "Layers": ["blobs/sha256/" + d[7:] for d in info["layers"]]}
    else:
        layers, parent = [], ""
        for d in info["layers"]:
            v1 = hashlib.sha256((parent + d).encode()).hexdigest()
            os.makedirs(os.path.join(tmp, v1))
            os.rename(os.path.join(tmp, "blobs", "sha256", d[7:]),
                      os.path.join(tmp, v1, "layer.tar"))
            with open(os.path.join(tmp, v1, "VERSION"), "w") as f:
                f.write("1.0")
            with open(os.path.join(tmp, v1, "json"), "w") as f:
                json.dump({"id": v1, "parent": parent} if parent else {"id": v1}, f)
            layers.append(v1 + "/layer.tar")
            parent = v1
        cfg = info["id"][7:] + ".json"
        os.rename(os.path.join(tmp, info["config_path"]), os.path.join(tmp, cfg))
        shutil.rmtree(os.path.join(tmp, "blobs"))
        entry = {"Config": cfg, "RepoTags": [name] if name else [], "Layers": layers}
        if name:
            repo, tag = name.rsplit(":", 1)
            with open(os.path.join(tmp, "repositories"), "w") as f:
                json.dump({repo: {tag: parent}}, f)
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump([entry], f)


def preset(name, arg):
    bb = {"compression": "gzip", "entries": [{"type": "busybox"}]}

    def hostile(entries):
        return {"config": {"Cmd": ["sh"]},
                "layers": [bb, {"compression": "gzip", "entries": entries}]}

    if name == "busybox":
        return {"config": {"Cmd": ["sh"]}, "layers": [bb]}
    if name == "app":
        return {
            "config": {"Env": DEFAULT_ENV + ["GREETING=hello from the image", "FOO=image"],
                       "WorkingDir": "/srv/app", "User": "1000:1000",
                       "Entrypoint": ["/bin/sh", "-c"],
                       "Cmd": ["echo entrypoint+cmd ran as $(id -u) in $(pwd): $GREETING"]},
            "layers": [bb,
                       {"compression": "gzip", "entries": [
                           {"type": "dir", "path": "srv"},
                           {"type": "dir", "path": "srv/app", "uid": 1000, "gid": 1000},
                           {"type": "file", "path": "srv/app/data", "data": "layer2\n"},
                           {"type": "file", "path": "etc/doomed", "data": "delete me\n"},
                           {"type": "dir", "path": "opt"},
                           {"type": "dir", "path": "opt/keep"},
                           {"type": "file", "path": "opt/keep/old1", "data": "old\n"},
                           {"type": "file", "path": "opt/keep/old2", "data": "old\n"},
                           {"type": "dir", "path": "opt/gone"},
                           {"type": "file", "path": "opt/gone/f", "data": "gone\n"},
                           {"type": "file", "path": "etc/replaced", "data": "lower\n"}]},
                       {"compression": "zstd", "entries": [
                           {"type": "file", "path": "etc/zstd-layer", "data": "zstd\n"}]},
                       {"compression": "gzip", "entries": [
                           {"type": "whiteout", "path": "etc/doomed"},
                           {"type": "whiteout", "path": "opt/gone"},
                           {"type": "dir", "path": "opt/keep"},
                           {"type": "opaque", "path": "opt/keep"},
                           {"type": "file", "path": "opt/keep/new", "data": "upper\n"},
                           {"type": "file", "path": "etc/replaced", "data": "upper\n"},
                           {"type": "file", "path": "srv/app/data", "data": "layer4\n"},
                           # no entry for root/ (0700 below): its mode must stay
                           {"type": "file", "path": "root/.profile", "data": "# sh\n"}]}]}
    if name == "multiarch":
        # arm64 first: a client that takes the first manifest gets the wrong one
        return {"config": {"Cmd": ["cat", "/etc/sbx-arch"]}, "layers": [bb],
                "platforms": ["linux/arm64/v8", "linux/amd64"]}
    if name == "quirks":
        # what real images hold and a strict unpacker must still take
        cap = "0100000200200000000000000000000000000000"  # vfs_cap_data v2: cap_net_raw
        return {"config": {"Cmd": ["sh"], "User": "app", "WorkingDir": "/not/in/the/image"},
                "layers": [bb,
                {"compression": "gzip", "entries": [
                    {"type": "file", "path": "etc/dup", "data": "first\n"},
                    {"type": "file", "path": "etc/hard-src", "data": "linked\n"},
                    {"type": "hardlink", "path": "etc/hard", "target": "etc/hard-src"},
                    {"type": "symlink", "path": "etc/abs-link", "target": "/etc/os-release"},
                    {"type": "symlink", "path": "etc/was-link", "target": "os-release"},
                    {"type": "file", "path": "bin/pingish", "mode": 0o755, "data": "ping\n",
                     "pax": {"SCHILY.xattr.security.capability": {"hex": cap},
                             "SCHILY.xattr.user.sbx-test": "yes"}},
                    {"type": "dir", "path": "opt"},
                    {"type": "file", "path": "opt/" + "l" * 200, "data": "long\n"},
                    {"type": "file", "path": "opt/\u00fcn\u00efc\u00f6de-\u540d\u524d",
                     "data": "utf8\n"},
                    {"type": "file", "path": "etc/dup", "data": "second\n"}]},
                {"compression": "gzip", "entries": [
                    {"type": "file", "path": "etc/was-link", "data": "now a file\n"},
                    {"type": "dir", "path": "opt"},
                    {"type": "file", "path": "opt/upper", "data": "upper\n"}]}]}
    if name == "crosslink":
        # a usrmerged base (lib -> usr/lib), then a layer that names lib/marker, as images
        # built from packages rather than by docker do
        return {"config": {"Cmd": ["sh"]}, "layers": [
            {"compression": "gzip", "entries": [
                {"type": "busybox"}, {"type": "dir", "path": "usr/lib"},
                {"type": "file", "path": "usr/lib/base", "data": "base\n"},
                {"type": "symlink", "path": "lib", "target": "usr/lib"}]},
            {"compression": "gzip", "entries": [
                {"type": "file", "path": "lib/marker", "data": "marker\n"}]}]}
    if name == "many":
        n = int(arg or 50)
        return {"config": {"Cmd": ["sh"]}, "layers": [bb] + [
            {"compression": "gzip", "entries": [
                {"type": "dir", "path": "layers"},
                {"type": "file", "path": "layers/%03d" % i, "data": "%d\n" % i}]}
            for i in range(1, n)]}
    if name == "big":
        return {"config": {"Cmd": ["sh"]},
                "layers": [bb, {"compression": "gzip", "entries": [
                    {"type": "file", "path": "big", "size": int(arg or 4 << 20)}]}]}
    if name == "escape":
        return hostile([{"type": "file", "path": "../escape", "data": "escaped\n"}])
    if name == "abs":
        return hostile([{"type": "dir", "path": "/abs"},
                        {"type": "file", "path": "/abs/evil-abs", "data": "abs\n"}])
    if name == "symlink":
        return hostile([{"type": "symlink", "path": "link", "target": arg or "/tmp/x"},
                        {"type": "file", "path": "link/evil", "data": "through a link\n"}])
    if name == "symlink-rel":
        return hostile([{"type": "symlink", "path": "rlink",
                         "target": "../../../../../../../../.."},
                        {"type": "file", "path": "rlink/tmp/evil-rel", "data": "rel\n"}])
    if name == "hardlink":
        # deep enough to reach the host's / from wherever the store unpacks it
        return hostile([{"type": "hardlink", "path": "h",
                         "target": "../" * 16 + "etc/passwd"}])
    if name == "hardlink-abs":
        return hostile([{"type": "hardlink", "path": "h", "target": "/etc/passwd"}])
    if name == "device":
        return hostile([{"type": "char", "path": "evil-null", "major": 1, "minor": 3}])
    if name == "setuid":
        return hostile([{"type": "file", "path": "bin/evil-suid", "mode": 0o4755,
                         "data": "#!/bin/sh\nid -u\n"},
                        {"type": "file", "path": "bin/evil-sgid", "mode": 0o2755,
                         "data": "#!/bin/sh\nid -g\n"}])
    if name == "bigowner":
        return hostile([{"type": "file", "path": "etc/bigowner", "data": "x\n",
                         "uid": 70000, "gid": 70000}])
    sys.exit("mkimage: unknown preset %r" % name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--format", default="oci",
                    choices=["oci", "oci-archive", "docker-archive", "docker-archive-oci"])
    ap.add_argument("--tag", default="latest")
    ap.add_argument("--name")
    ap.add_argument("--no-ref-name", action="store_true")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--preset")
    g.add_argument("--spec")
    ap.add_argument("--arg")
    a = ap.parse_args()
    spec = preset(a.preset, a.arg) if a.preset else json.load(open(a.spec))

    if a.format == "oci":
        lay = Layout(a.out)
        desc, info = build(lay, spec)
        add_ref(a.out, desc, {"org.opencontainers.image.ref.name": a.tag})
    else:
        tmp = a.out + ".d"
        shutil.rmtree(tmp, ignore_errors=True)
        lay = Layout(tmp)
        docker = a.format.startswith("docker")
        if docker and spec.get("platforms"):
            sys.exit("mkimage: a docker-save tar holds no index: drop platforms")
        desc, info = build(lay, spec, uncompressed=docker)
        ann = {}
        if not a.no_ref_name:
            ann["org.opencontainers.image.ref.name"] = a.name or a.tag
            if a.name and a.format == "docker-archive-oci":  # docker names the tag only
                ann["org.opencontainers.image.ref.name"] = a.name.rsplit(":", 1)[1]
            if a.name:
                ann["io.containerd.image.name"] = a.name
        if a.format == "docker-archive":
            docker_archive(tmp, info, None if a.no_ref_name else a.name, False)
        else:
            add_ref(tmp, desc, ann)
            if a.format == "docker-archive-oci":
                docker_archive(tmp, info, None if a.no_ref_name else a.name, True)
        write_tar(tmp, a.out)
        shutil.rmtree(tmp)
    info.pop("config_path", None)
    for p in info.get("platforms", {}).values():
        p.pop("config_path", None)
    info.setdefault("index", desc["digest"] if desc["mediaType"] == OCI_INDEX else None)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
