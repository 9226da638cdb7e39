#!/usr/bin/python3
"""A small root file system to run apt-get and dpkg in, made from this host's own installed
packages, as a .tar.gz that `sbx image import --rootfs TAR NAME` takes.

Usage: mkaptimage.py --out FILE.tar.gz [--source LINE] [PACKAGE...]
What goes in: the packages named (default: apt, dpkg, bash, coreutils and the few tools dpkg
and maintainer scripts call) and the closure of their Depends and Pre-Depends as this host
has them installed (of alternatives, the first one installed), each package's files as
`dpkg -L` lists them (documentation, manuals and translations left out, and debconf's apt
hook, which needs perl); /var/lib/dpkg/status holding those packages' stanzas only and their
file lists, so that dpkg and apt see a consistent system; /etc/passwd and /etc/group with
root and _apt; /etc/apt/sources.list with LINE (default none); and the directories apt and dpkg write to. Paths are taken as they
really are on disk (a usrmerged /bin/bash goes in as usr/bin/bash, under a bin -> usr/bin
link). Owners are root, set-id bits dropped, mtimes fixed. Python standard library only.
"""
import argparse
import io
import os
import re
import subprocess
import sys
import tarfile

BASE = ["apt", "dpkg", "bash", "coreutils", "dash", "tar", "gzip", "sed", "grep", "findutils",
        "diffutils", "debianutils", "libc-bin"]
# debconf's hook runs dpkg-preconfigure, a perl script, before every install: the image has no
# perl (nothing it holds depends on perl), so the hook stays out
SKIP = {"etc/apt/apt.conf.d/70debconf"}
SKIP_PREFIXES = ("usr/share/doc/", "usr/share/man/", "usr/share/locale/", "usr/share/info/",
                 "usr/share/lintian/", "usr/share/doc-base/")
MTIME = 1700000000


def installed():
    """{package name: its dpkg -s fields} of every installed package"""
    out = subprocess.run(["dpkg-query", "-W", "-f",
                          "${Package}\t${db:Status-Abbrev}\t${Depends}\t${Pre-Depends}\t"
                          "${Provides}\n"], check=True, stdout=subprocess.PIPE).stdout.decode()
    pkgs, provides = {}, {}
    for line in out.splitlines():
        name, status, dep, pre, prov = (line.split("\t") + [""] * 5)[:5]
        if not status.startswith("ii"):
            continue
        pkgs[name] = ", ".join(x for x in (dep, pre) if x.strip())
        for p in prov.split(","):
            p = re.sub(r"\(.*?\)", "", p).strip()
            if p:
                provides.setdefault(p, name)
    return pkgs, provides


def closure(roots, pkgs, provides):
    want, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in want:
            continue
        if p not in pkgs:
            sys.exit("mkaptimage: %s is not installed on this host" % p)
        want.add(p)
        for group in pkgs[p].split(","):
            if not group.strip():
                continue
            for alt in group.split("|"):
                n = re.sub(r"\(.*?\)", "", alt).strip().split(":")[0]
                if n in pkgs:
                    todo.append(n)
                    break
                if n in provides:
                    todo.append(provides[n])
                    break
    return sorted(want)


def real(path):
    """path with its directories' symlinks resolved, the last component as it is"""
    d, b = os.path.split(path)
    return os.path.join(os.path.realpath(d), b)


class Image:
    def __init__(self, out):
        self.t = tarfile.open(out, "w:gz", compresslevel=1, format=tarfile.PAX_FORMAT)
        self.seen = set()

    def _fix(self, i):
        i.uid = i.gid = 0
        i.uname = i.gname = ""
        i.mtime = MTIME
        i.mode &= 0o1777
        return i

    def add_host(self, path):
        """one host path (and its parent directories), as it really is"""
        p = real(path)
        arc = p.lstrip("/")
        if not arc or arc in self.seen or arc in SKIP or arc.startswith(SKIP_PREFIXES):
            return
        parent = os.path.dirname(p)
        if parent != "/":
            self.add_host(parent)
        try:
            st = os.lstat(p)
        except OSError:
            return
        self.seen.add(arc)
        i = self._fix(self.t.gettarinfo(p, arc))
        if i.isreg():
            try:
                with open(p, "rb") as f:
                    self.t.addfile(i, f)
            except OSError:
                i.size = 0  # unreadable here: there, but empty
                self.t.addfile(i, io.BytesIO(b""))
        elif i.isdir() or i.issym() or i.islnk():
            self.t.addfile(i)
        del st

    def add_dir(self, arc, mode=0o755):
        if arc in self.seen:
            return
        parent = os.path.dirname(arc)
        if parent:
            self.add_dir(parent)
        self.seen.add(arc)
        i = tarfile.TarInfo(arc)
        i.type, i.mode = tarfile.DIRTYPE, mode
        self.t.addfile(self._fix(i))

    def add_file(self, arc, data, mode=0o644):
        self.add_dir(os.path.dirname(arc))
        self.seen.add(arc)
        b = data.encode() if isinstance(data, str) else data
        i = tarfile.TarInfo(arc)
        i.size, i.mode = len(b), mode
        self.t.addfile(self._fix(i), io.BytesIO(b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--source", default="")
    ap.add_argument("packages", nargs="*")
    a = ap.parse_args()
    pkgs, provides = installed()
    want = closure(a.packages or BASE, pkgs, provides)
    img = Image(a.out)
    # the usrmerged top level: links first, so that what is under them goes to usr/
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        if os.path.islink("/" + top):
            img.add_host("/" + top)
    lists = {}
    for p in want:
        out = subprocess.run(["dpkg-query", "-L", p], check=True,
                             stdout=subprocess.PIPE).stdout.decode()
        lists[p] = out
        for path in out.splitlines():
            if path.startswith("/") and path != "/.":
                img.add_host(path)
    # dpkg's view of it: these packages and no others, their file lists
    stanzas = []
    with open("/var/lib/dpkg/status") as f:
        for st in f.read().split("\n\n"):
            m = re.search(r"^Package: (\S+)$", st, re.M)
            if m and m.group(1) in want and re.search(r"^Status: install ok installed$",
                                                      st, re.M):
                stanzas.append(st.strip("\n"))
    img.add_file("var/lib/dpkg/status", "\n\n".join(stanzas) + "\n")
    img.add_file("var/lib/dpkg/available", "")
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True,
                          stdout=subprocess.PIPE).stdout.decode().strip()
    for p, out in lists.items():
        for n in (p, p + ":" + arch):
            if os.path.exists("/var/lib/dpkg/info/%s.list" % n):
                img.add_file("var/lib/dpkg/info/%s.list" % n, out)
    for d in ("updates", "triggers", "alternatives", "parts"):
        img.add_dir("var/lib/dpkg/" + d)
    if os.path.exists("/var/lib/dpkg/arch"):
        img.add_host("/var/lib/dpkg/arch")
    for d in ("var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/log/apt",
              "etc/apt/sources.list.d", "etc/apt/preferences.d", "etc/apt/apt.conf.d",
              "var/cache/debconf", "root", "proc", "sys", "dev", "run", "home"):
        img.add_dir(d, 0o700 if d == "root" else 0o755)
    img.add_dir("tmp", 0o1777)
    img.add_dir("var/tmp", 0o1777)
    img.add_file("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n"
                 "_apt:x:42:65534::/nonexistent:/usr/sbin/nologin\n"
                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    img.add_file("etc/group", "root:x:0:\nnogroup:x:65534:\n")
    img.add_file("etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files dns\n")
    img.add_file("etc/apt/sources.list", a.source + "\n" if a.source else "")
    img.t.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
