#!/usr/bin/python3
"""End-to-end test of `dlqctl doctor redis+sentinel://…` (the sentinel view; run by ctest
where DLQ_SENTINEL_TESTS is on).

    test_doctor_sentinel.py --dlqctl PATH --sentinel-script tests/support/redis_sentinel.sh

Starts its own master, replica and three sentinels (redis_sentinel.sh, as the Sentinel tests
do) and breaks them one by one, asking the doctor after each step:
  1. all up: sentinels 3/3, sentinel-master the master's address, sentinel-quorum quorum 2,
     3 sentinels known, CKQUORUM OK, sentinel-replicas the replica with master link ok, the
     usual checks on the master (role master); exit 0; --json carries the same findings;
  2. a master name no sentinel monitors: exit 2 (no master to check);
  3. one sentinel killed: WARN sentinels 2/3 naming it;
  4. the replica killed: WARN sentinel-replicas once the sentinels flag it (down-after 1 s);
  5. the master killed (no replica left to promote): ERROR sentinel-master with s_down, an
     ERROR master finding, exit 4.
Steps 4 and 5 wait (at most 15 s) for the sentinels to notice: their down-after-milliseconds
is 1000 and o_down needs the quorum's votes; the wait is for their detection, the checks are
made on the first report that shows it. Fails loudly: any failed check exits 1.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ARGS = None
FAILURES = []
LINE = re.compile(r"^(OK|WARN|ERROR) ([a-z-]+): (.*?)(?: — (.*))?$")


def check(cond, what, detail=""):
    if not cond:
        FAILURES.append(what)
        print(f"    FAILED: {what} {detail}", flush=True)
    return cond


def doctor(url, *extra):
    p = subprocess.run([ARGS.dlqctl, "doctor", url, "--timeout", "2s", *extra],
                       capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def rows_of(out):
    rows = []
    for line in out.splitlines():
        m = LINE.match(line)
        if not check(m is not None, "every line is LEVEL check: finding — fix", repr(line)):
            return []
        rows.append(m.groups())
    return rows


def has(rows, level, name, text=""):
    return any(r[0] == level and r[1] == name and text in r[2] for r in rows)


def show(out):
    print("".join(f"    | {l}\n" for l in out.splitlines()), end="", flush=True)


def wait_for(url, level, name, text):
    """Asks the doctor until a finding `level name: …text…` shows (at most 15 s)."""
    deadline = time.monotonic() + 15
    while True:
        rc, out, err = doctor(url)
        rows = rows_of(out)
        if has(rows, level, name, text) or time.monotonic() > deadline:
            show(out)
            return rc, out, err, rows
        time.sleep(0.5)


def kill(pidfile):
    with open(pidfile) as f:
        os.kill(int(f.read().strip()), signal.SIGKILL)


def run_steps(d, env):
    url = env["URL"]
    ports = env["SENTINEL_PORTS"].split()
    master, replica = env["MASTER_PORT"], env["REPLICA_PORT"]
    print("- all up: the sentinel view, then the master's checks; exit 0", flush=True)
    rc, out, err = doctor(url)
    show(out)
    rows = rows_of(out)
    check(rc == 0, "all up: exit 0", f"(exit {rc}; {err!r})")
    check(has(rows, "OK", "sentinels", "3/3 sentinels of the URL answered for 'mymaster'"),
          "OK sentinels 3/3", out)
    check(has(rows, "OK", "sentinel-master", f"127.0.0.1:{master} (flags master)"),
          "OK sentinel-master names the master", out)
    check(has(rows, "OK", "sentinel-quorum", "quorum 2, 3 sentinels known, CKQUORUM OK"),
          "OK sentinel-quorum", out)
    check(has(rows, "OK", "sentinel-replicas", f"1 replica known: 127.0.0.1:{replica} (flags "
                                               "slave, master link ok)"),
          "OK sentinel-replicas with the replica", out)
    check(has(rows, "OK", "role", "master, 1 connected replica"), "the master's checks", out)
    rc, jout, err = doctor(url, "--json")
    try:
        doc = json.loads(jout)
    except ValueError as e:
        check(False, "--json parses", f"{e}: {jout!r}")
        doc = {"findings": []}
    same = sorted((f["level"], f["check"], f["finding"]) for f in doc["findings"])
    check(same == sorted((r[0], r[1], r[2]) for r in rows), "--json carries the same findings",
          f"{same} vs {rows}")

    print("- a master name no sentinel monitors: exit 2", flush=True)
    rc, out, err = doctor(url.rsplit("/", 1)[0] + "/nosuch")
    check(rc == 2, "unknown master name: exit 2", f"(exit {rc}; {out!r}; {err!r})")
    check("nosuch" in err, "the error names the master name", repr(err))

    print("- one sentinel killed: WARN sentinels 2/3", flush=True)
    kill(f"{d}/s3/pid")
    rc, out, err = doctor(url)
    show(out)
    rows = rows_of(out)
    check(rc == 0, "a sentinel down: exit 0 (a warning)", f"(exit {rc}; {err!r})")
    check(has(rows, "WARN", "sentinels", f"2/3 sentinels") and
          has(rows, "WARN", "sentinels", f"not: 127.0.0.1:{ports[2]} ("),
          "WARN sentinels 2/3 naming the silent one", out)
    check(has(rows, "OK", "sentinel-quorum", "CKQUORUM OK"), "two of three still a quorum", out)

    print("- the replica killed: WARN sentinel-replicas", flush=True)
    kill(f"{d}/replica/pid")
    rc, out, err, rows = wait_for(url, "WARN", "sentinel-replicas", "s_down")
    flags = re.search(rf"127\.0\.0\.1:{replica} \(flags ([a-z_,]+)", out)  # in the sentinel's order
    check(flags is not None and "s_down" in flags.group(1).split(",") and
          has(rows, "WARN", "sentinel-replicas"), "WARN sentinel-replicas: the replica s_down", out)

    print("- the master killed, no replica to promote: ERROR sentinel-master, exit 4", flush=True)
    kill(f"{d}/master/pid")
    rc, out, err, rows = wait_for(url, "ERROR", "sentinel-master", "o_down")
    check(rc == 4, "master down: exit 4 (a report, not exit 2)", f"(exit {rc}; {err!r})")
    flags = re.search(rf"sentinel-master: 127\.0\.0\.1:{master} \(flags ([a-z_,]+)\)", out)
    check(flags is not None and {"s_down", "o_down"} <= set(flags.group(1).split(",")) and
          has(rows, "ERROR", "sentinel-master"), "ERROR sentinel-master: s_down, o_down", out)
    check(has(rows, "ERROR", "master", "cannot be used"), "ERROR master: cannot be used", out)
    check(not any(r[1] == "queues" for r in rows), "no queues finding: the master was not scanned",
          out)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--dlqctl", required=True)
    p.add_argument("--sentinel-script", required=True)
    ARGS = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="dlq-doctor-sentinel-") as tmp:
        d = os.path.join(tmp, "s")
        subprocess.run([ARGS.sentinel_script, "start", d], check=True)
        try:
            env = {}
            with open(os.path.join(d, "env")) as f:
                for line in f:
                    k, _, v = line.strip().partition("=")
                    env[k] = v.strip('"')
            run_steps(d, env)
        finally:
            subprocess.run([ARGS.sentinel_script, "stop", d])
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", flush=True)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
