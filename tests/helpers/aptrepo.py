#!/usr/bin/python3
"""A flat apt repository for the network tests: one small generated package, built with
dpkg-deb, and the Packages, Packages.gz and Release files that index it, for a sources line
"deb [trusted=yes] http://HOST/ ./" (no signature: the line trusts it).

Usage: aptrepo.py OUTDIR [--name sbxt-hello]
The package NAME, version 1.0, architecture all, holds /usr/bin/NAME (a shell script that
prints "hello from NAME") and /usr/share/NAME/data.txt ("data of NAME"), and its postinst
writes /var/lib/NAME/postinst-ran, so that a test sees the package unpacked and configured.
OUTDIR then holds NAME_1.0_all.deb, Packages, Packages.gz, Release. Serve it with any static
HTTP server (tests/helpers/netsrv.py --root OUTDIR). Needs dpkg-deb; otherwise Python's
standard library only.
"""
import argparse
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--name", default="sbxt-hello")
    a = ap.parse_args()
    n, out = a.name, a.out
    os.makedirs(out, exist_ok=True)
    src = tempfile.mkdtemp(prefix="aptrepo.")
    try:
        write(os.path.join(src, "DEBIAN/control"),
              "Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: sbx tests "
              "<tests@example.invalid>\nSection: misc\nPriority: optional\n"
              "Description: a package of the sbx network tests\n prints hello\n" % n)
        write(os.path.join(src, "DEBIAN/postinst"),
              "#!/bin/sh\nset -e\nmkdir -p /var/lib/%s\necho configured >/var/lib/%s/postinst-ran\n"
              % (n, n), 0o755)
        write(os.path.join(src, "usr/bin", n), "#!/bin/sh\necho \"hello from %s\"\n" % n, 0o755)
        write(os.path.join(src, "usr/share", n, "data.txt"), "data of %s\n" % n)
        for d, _, _ in os.walk(src):
            os.chmod(d, 0o755)
        deb = os.path.join(out, "%s_1.0_all.deb" % n)
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", src, deb],
                       check=True, stdout=subprocess.DEVNULL)
    finally:
        shutil.rmtree(src)
    data = open(deb, "rb").read()
    control = subprocess.run(["dpkg-deb", "--field", deb], check=True,
                             stdout=subprocess.PIPE).stdout.decode()
    stanza = control.rstrip("\n") + "\nFilename: ./%s\nSize: %d\nMD5sum: %s\nSHA256: %s\n\n" % (
        os.path.basename(deb), len(data), hashlib.md5(data).hexdigest(),
        hashlib.sha256(data).hexdigest())
    with open(os.path.join(out, "Packages"), "w") as f:
        f.write(stanza)
    with gzip.GzipFile(os.path.join(out, "Packages.gz"), "wb", mtime=0) as g:
        g.write(stanza.encode())
    rel = ["Origin: sbx-tests", "Label: sbx-tests", "Suite: test", "Codename: test",
           "Date: Tue, 14 Nov 2023 22:13:20 UTC", "Architectures: all amd64 arm64",
           "Description: the sbx network tests' repository"]
    for field, h in (("MD5Sum", hashlib.md5), ("SHA256", hashlib.sha256)):
        rel.append(field + ":")
        for f in ("Packages", "Packages.gz"):
            b = open(os.path.join(out, f), "rb").read()
            rel.append(" %s %d %s" % (h(b).hexdigest(), len(b), f))
    with open(os.path.join(out, "Release"), "w") as f:
        f.write("\n".join(rel) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
