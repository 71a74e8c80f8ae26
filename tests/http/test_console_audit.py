#!/usr/bin/python3
"""The audit trail against a flood of deletes (issue 27, defect 5), end to end: `dlqctl serve`
over the test Redis, driven through urllib, the trail read back with `dlqctl audit` and from
the stream itself.

    test_console_audit.py --dlqctl PATH      (ctest: fixture `redis`)

Before the fix a removal of an id that was not there wrote a "not found" record, the console
removed ids one by one, and the stream was capped at 10 000 records: 11 POST /api/delete of
1000 made-up ids each (1.9 s) pushed the record of a purge out of the trail. Now an operation
that changes nothing writes nothing, a request is one record naming the ids it removed, and
the trail is kept by age.
"""
import argparse
import json
import re
import signal
import subprocess
import time
import uuid

from console_support import (call, check, dead_key, dlqctl_audit, envelope, finish, redis_client,
                             redis_url, Serve)

DB = 10


def audit_key(queue):
    return dead_key(queue) + ":audit"


def audit_trail(dlqctl, url, queue):
    out = dlqctl_audit(dlqctl, url, queue, "--json", "--limit", "100000")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    url = redis_url(DB)
    r = redis_client(url)
    q = "console-audit-" + uuid.uuid4().hex[:8]
    for k in r.scan_iter("*console-audit-*"):
        r.delete(k)
    r.rpush(dead_key(q), *[envelope(q, {"n": i}, "boom") for i in range(5)])

    serve = Serve(args.dlqctl, url)
    try:
        base = serve.url
        status, body, _ = call(base, "api/purge", {"queue": q, "confirm": q})
        check(status == 200 and body["deleted"] == 5, "purge", f"{status} {body}")
        check(r.xlen(audit_key(q)) == 1, "the purge wrote one record", f"XLEN {r.xlen(audit_key(q))}")

        # The flood of the issue: 11 requests of 1000 made-up ids each.
        started = time.time()
        for request in range(11):
            ids = [f"made-up-{request}-{i}-{uuid.uuid4()}" for i in range(1000)]
            status, body, _ = call(base, "api/delete", {"queue": q, "ids": ids})
            check(status == 200 and body["deleted"] == 0 and len(body["missing"]) == 1000,
                  f"delete request {request} of made-up ids", f"{status} {str(body)[:200]}")
        took = time.time() - started
        print(f"    11 x 1000 made-up ids: {took:.2f} s", flush=True)
        check(r.xlen(audit_key(q)) == 1, "the flood wrote no record", f"XLEN {r.xlen(audit_key(q))}")
        trail = audit_trail(args.dlqctl, url, q)
        check(len(trail) == 1 and trail[0]["operation"] == "purge" and trail[0]["counts"]["purged"] == 5,
              "dlqctl audit still shows the purge", f"{len(trail)} records, first {str(trail[:1])[:300]}")

        # One request, one record naming the ids it removed.
        real = [str(uuid.uuid4()) for _ in range(4)]
        r.rpush(dead_key(q), *[envelope(q, {"n": i}, "again", entry_id=real[i]) for i in range(4)])
        ids = [real[2]] + [f"made-up-{i}" for i in range(998)] + [real[0]]
        status, body, _ = call(base, "api/delete", {"queue": q, "ids": ids})
        check(status == 200 and body["deleted"] == 2 and len(body["missing"]) == 998,
              "delete of 2 real and 998 made-up ids", f"{status} {str(body)[:200]}")
        check(r.llen(dead_key(q)) == 2, "two entries left")
        trail = audit_trail(args.dlqctl, url, q)
        check(len(trail) == 2, "the request wrote one record", f"{len(trail)} records")
        if len(trail) == 2:
            rec = trail[1]
            check(rec["operation"] == "remove" and rec["ids"] == [real[2], real[0]]
                  and rec["counts"].get("removed") == 2 and rec["counts"].get("not_found") == 998
                  and rec["outcome"] == "ok", "the record names the ids removed", str(rec)[:400])
    finally:
        serve.stop()
        for k in r.scan_iter(f"*{q}*"):
            r.delete(k)

    # The cap, set with dlqctl's global options (before `serve`): removing records younger
    # than the max age is logged and marked in the trail, never silent.
    q2 = q + "-capped"
    ids = [str(uuid.uuid4()) for _ in range(30)]
    r.rpush(dead_key(q2), *[envelope(q2, {"n": i}, "boom", entry_id=ids[i]) for i in range(30)])
    proc = subprocess.Popen([args.dlqctl, "--audit-max-age", "30d", "--audit-max-records", "10",
                             "--store", url, "serve", "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline().decode()
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+/)", line)
        check(m is not None, "dlqctl --audit-max-age 30d --audit-max-records 10 serve starts", line)
        if m:
            for i in range(30):
                status, body, _ = call(m.group(1), "api/delete", {"queue": q2, "ids": [ids[i]]})
                check(status == 200 and body["deleted"] == 1, f"delete {i}", f"{status} {body}")
            length = r.xlen(audit_key(q2))
            check(length <= 11, "the stream is held at the cap", f"XLEN {length}")
            trail = audit_trail(args.dlqctl, url, q2)
            marks = [t for t in trail if t["operation"] == "audit_dropped"]
            check(len(marks) > 0 and all(t["counts"]["dropped"] == 2 for t in marks),
                  "audit_dropped records mark the removals", str(trail)[:400])
            check(trail[-1]["operation"] == "audit_dropped" and trail[-2]["ids"] == [ids[29]],
                  "the newest records stay", str(trail[-2:])[:400])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = proc.stderr.read().decode(errors="replace")
        check("[dlq.audit] queue '" + q2 + "': 2 audit records younger than the trail's max age "
              "were removed by its cap" in err, "the console logs the removal", err[-600:])
        for k in r.scan_iter(f"*{q2}*"):
            r.delete(k)
    finish("test_console_audit")


if __name__ == "__main__":
    main()
