#!/usr/bin/python3
"""Checks a sandbox's egress log, as printed by `sbx logs --egress --json` (one JSON object a line).

  egress.py schema FILE
      every line has the documented keys with the documented types; at least one line
  egress.py match FILE [--exec ID|--exec-other ID...] [--command CMD] [--proto P]
                       [--domain D] [--port N] [--verdict V] [--min-bytes-down N] [--count N]
      at least N lines (default 1) match every field given; --exec-other: an exec id that is
      none of the IDs given (and not null)
  egress.py exec-ids FILE --command CMD
      prints the exec ids of the lines whose command is CMD, one a line
Exit 0 when the check holds, 1 (printing the log) when it does not. Standard library only.
"""
import argparse
import json
import re
import sys

KEYS = {"time", "exec", "command", "proto", "domain", "port", "verdict", "reason", "bytes_up",
        "bytes_down", "duration_ms"}
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)$")
EXEC = re.compile(r"^[0-9a-f]{12}$")


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def schema(rows):
    if not rows:
        return ["the log is empty"]
    bad = []
    for i, r in enumerate(rows):
        why = []
        if "policy" in r:  # sbx update's line: the policy from then on
            if r.get("policy") != "update" or not isinstance(r.get("allow"), list):
                bad.append("line %d: a policy line without its allow list" % (i + 1))
            continue
        missing = KEYS - set(r)
        if missing:
            why.append("missing %s" % sorted(missing))
        if not isinstance(r.get("time"), str) or not TIME.match(r.get("time")):
            why.append("time %r is not ISO 8601 UTC" % r.get("time"))
        e = r.get("exec")
        if e is not None and not (isinstance(e, str) and EXEC.match(e)):
            why.append("exec %r is neither null nor 12 hex digits" % e)
        if e is not None and not isinstance(r.get("command"), str):
            why.append("command %r is not a string" % r.get("command"))
        if r.get("proto") not in ("http", "connect", "socks"):
            why.append("proto %r" % r.get("proto"))
        if not isinstance(r.get("domain"), str) or not r.get("domain"):
            why.append("domain %r" % r.get("domain"))
        p = r.get("port")
        if not is_int(p) or not 0 < p < 65536:
            why.append("port %r is not a port number" % p)
        if r.get("verdict") not in ("allow", "deny"):
            why.append("verdict %r" % r.get("verdict"))
        if not isinstance(r.get("reason"), str):
            why.append("reason %r is not a string" % r.get("reason"))
        for k in ("bytes_up", "bytes_down"):
            if not is_int(r.get(k)) or r.get(k) < 0:
                why.append("%s %r" % (k, r.get(k)))
        d = r.get("duration_ms")
        if not (is_int(d) or isinstance(d, float)) or isinstance(d, bool) or d < 0:
            why.append("duration_ms %r" % d)
        if why:
            bad.append("line %d: %s" % (i + 1, "; ".join(why)))
    return bad


def matches(r, a):
    if "policy" in r:
        return False
    if a.exec is not None and r.get("exec") != a.exec:
        return False
    if a.exec_other is not None:
        if r.get("exec") is None or r.get("exec") in a.exec_other:
            return False
    for key in ("command", "proto", "domain", "verdict"):
        want = getattr(a, key)
        if want is not None and r.get(key) != want:
            return False
    if a.port is not None and r.get("port") != a.port:
        return False
    if a.min_bytes_down is not None and not (is_int(r.get("bytes_down"))
                                             and r["bytes_down"] >= a.min_bytes_down):
        return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["schema", "match", "exec-ids"])
    ap.add_argument("file")
    ap.add_argument("--exec")
    ap.add_argument("--exec-other", action="append")
    ap.add_argument("--command")
    ap.add_argument("--proto")
    ap.add_argument("--domain")
    ap.add_argument("--port", type=int)
    ap.add_argument("--verdict")
    ap.add_argument("--min-bytes-down", type=int)
    ap.add_argument("--count", type=int, default=1)
    a = ap.parse_args()
    try:
        rows = load(a.file)
    except (OSError, ValueError) as e:
        print("egress: cannot read %s: %s" % (a.file, e))
        return 1
    if a.what == "exec-ids":
        for r in rows:
            if r.get("command") == a.command and r.get("exec"):
                print(r["exec"])
        return 0
    if a.what == "schema":
        bad = schema(rows)
    else:
        n = sum(1 for r in rows if matches(r, a))
        bad = [] if n >= a.count else ["%d line(s) match, wanted %d: %s" % (
            n, a.count, " ".join("%s=%r" % (k, v) for k, v in vars(a).items()
                                 if v is not None and k not in ("what", "file", "count")))]
    if bad:
        for b in bad:
            print("egress: " + b)
        print("egress: the log (%d lines):" % len(rows))
        for r in rows:
            print("  " + json.dumps(r, sort_keys=True))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
