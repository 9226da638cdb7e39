#!/usr/bin/env python3
"""A bash-tool loop as an agent framework runs one: CALLERS processes, each making CALLS mixed
calls of sbx (exec --json with varied output and exit statuses, ls --json, inspect, a bad id)
and judging each only by its exit status and its JSON. Usage: agent-loop.py SBX SB CALLERS CALLS
Prints "ok N" or the first wrong result, exits 0 or 1."""
import json
import os
import random
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

SBX, SB = sys.argv[1], sys.argv[2]
CALLERS, CALLS = int(sys.argv[3]), int(sys.argv[4])


def run(args):
    p = subprocess.run([SBX] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, timeout=60)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, rc, out, err):
    if not cond:
        raise AssertionError("%s: rc %d, stdout %r, stderr %r" % (what, rc, out[:300], err[:300]))


def caller(k):
    rnd = random.Random(k)
    for i in range(CALLS):
        kind = rnd.randrange(10)
        if kind < 6:  # exec --json: n lines of a known text on stdout, m bytes on stderr
            n, m, code = rnd.randrange(0, 3000), rnd.randrange(0, 500), rnd.choice([0, 1, 3, 42, 125])
            tag = "c%d-%d" % (k, i)
            script = ('i=0; while [ $i -lt %d ]; do echo "%s $i"; i=$((i+1)); done; '
                      'head -c %d /dev/zero | tr "\\0" e >&2; exit %d' % (n, tag, m, code))
            rc, out, err = run(["exec", "--json", SB, "sh", "-c", script])
            check(rc == code, "exec exit status", rc, out, err)
            r = json.loads(out)
            want = "".join("%s %d\n" % (tag, j) for j in range(n))
            check(r["exit_code"] == code and r["signal"] is None and not r["timed_out"],
                  "exec result", rc, out, err)
            check(r["stdout"] == want and r["stdout_bytes"] == len(want) and
                  not r["stdout_truncated"], "exec stdout", rc, out, err)
            check(r["stderr"] == "e" * m and r["stderr_bytes"] == m, "exec stderr", rc, out, err)
            check(err == b"", "nothing else on stderr", rc, out, err)
        elif kind < 7:
            rc, out, err = run(["ls", "--json"])
            check(rc == 0 and any(x["name"] == SB for x in json.loads(out)), "ls --json",
                  rc, out, err)
        elif kind < 8:
            rc, out, err = run(["inspect", "--json", SB])
            check(rc == 0 and json.loads(out)["state"] == "running", "inspect", rc, out, err)
        elif kind < 9:
            rc, out, err = run(["exec", "--json", "no-such-box-%d" % k, "true"])
            e = json.loads(err)
            check(rc == 125 and out == b"" and e["error"]["code"] == "not_found",
                  "a bad id", rc, out, err)
        else:
            rc, out, err = run(["exec", "--json", SB, "no-such-command"])
            e = json.loads(err)
            check(rc == 127 and out == b"" and e["error"]["code"] == "command_not_found",
                  "a missing command", rc, out, err)
    return CALLS


if __name__ == "__main__":
    with ProcessPoolExecutor(CALLERS) as ex:
        try:
            total = sum(ex.map(caller, range(CALLERS)))
        except AssertionError as e:
            print("wrong: %s" % e)
            sys.exit(1)
    print("ok %d" % total)
