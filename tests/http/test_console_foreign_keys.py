#!/usr/bin/python3
"""A foreign Redis key whose queue name dlq cannot serve (a NUL byte: `dlq:{nul\\x00byte}`),
or a key of another type at the name of a queue's list, beside a normal queue: monitoring
must go on for the normal queue and say how many names it skipped — `/metrics` and
`/api/queues` of `dlqctl serve` answer 200, `dlqctl metrics`, `stats` and `queues` exit 0.

    test_console_foreign_keys.py --dlqctl PATH      (ctest: fixture `redis`)
"""
import argparse
import json
import subprocess

from console_support import (Serve, call, check, dead_key, envelope, finish, redis_client,
                             redis_url)

DB = 15  # its own: this test FLUSHDBs (the DB table is in console_support.redis_url)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    url = redis_url(DB)
    r = redis_client(url)
    r.flushdb()
    q = "foreign-orders"
    r.rpush(dead_key(q), envelope(q, {"n": 1}, "boom"), envelope(q, {"n": 2}, "boom"))
    r.rpush(b"dlq:{nul\x00byte}", b"x")  # a foreign list: the name has a NUL byte

    srv = Serve(args.dlqctl, url)
    try:
        status, body, _ = call(srv.url, "metrics")
        text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
        check(status == 200, "/metrics answers 200", f"({status} {text[:300]!r})")
        check(f'dlq_entries{{queue="{q}",list="dead"}} 2' in text, "/metrics has the normal queue",
              f"{text[:600]!r}")
        check("dlq_skipped_queues 1" in text, "/metrics counts the skipped name", f"{text[-600:]!r}")
        check("nul" not in text, "/metrics leaves the skipped name out")

        status, body, _ = call(srv.url, "api/queues")
        check(status == 200, "/api/queues answers 200", f"({status} {body!r:.300})")
        names = [x["name"] for x in body.get("queues", [])] if isinstance(body, dict) else []
        check(names == [q], "/api/queues lists the normal queue only", f"{names!r}")
        check(isinstance(body, dict) and body.get("skipped_queues") == 1,
              "/api/queues counts the skipped name", f"{body!r:.300}")
        status, body, _ = call(srv.url, "healthz")
        check(status == 200, "/healthz answers 200", f"({status} {body!r:.300})")
    finally:
        srv.stop()

    def dlqctl(*argv):
        return subprocess.run([args.dlqctl, "--store", url, *argv], capture_output=True, timeout=60)

    p = dlqctl("metrics")
    out = p.stdout.decode(errors="replace")
    check(p.returncode == 0, "dlqctl metrics exits 0", f"(rc {p.returncode}: {p.stderr!r:.300})")
    check(f'dlq_entries{{queue="{q}",list="dead"}} 2' in out, "dlqctl metrics has the normal queue",
          f"{out[:600]!r}")
    check("dlq_skipped_queues 1" in out, "dlqctl metrics counts the skipped name", f"{out[-400:]!r}")

    p = dlqctl("stats", "--json")
    check(p.returncode == 0, "dlqctl stats exits 0", f"(rc {p.returncode}: {p.stderr!r:.300})")
    rows = [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()] if p.returncode == 0 else []
    check([x.get("queue") for x in rows] == [q], "dlqctl stats lists the normal queue", f"{rows!r:.300}")
    check(b"1 queue name" in p.stderr and b"skipped" in p.stderr, "dlqctl stats says it skipped one",
          f"{p.stderr!r:.300}")

    p = dlqctl("queues")
    check(p.returncode == 0, "dlqctl queues exits 0", f"(rc {p.returncode}: {p.stderr!r:.300})")
    check(q.encode() in p.stdout, "dlqctl queues lists the normal queue", f"{p.stdout!r:.300}")
    wrong_types(args, url, r, q)
    forged_log_line(args, url, r)
    empty_name(args, url, r)
    r.flushdb()
    finish("test_console_foreign_keys")


def empty_name(args, url, r):
    """Round 11 of issue 27: a foreign list `dlq:{}` (an empty queue name, which dlq refuses as
    it refuses a NUL byte) was neither listed nor counted: /api/queues and /metrics said
    skipped 0, and its entries were invisible."""
    r.flushdb()
    q = "beside-empty"
    r.rpush(dead_key(q), envelope(q, {"n": 1}, "boom"))
    r.rpush(b"dlq:{}", b"x", b"y")
    srv = Serve(args.dlqctl, url)
    try:
        status, body, _ = call(srv.url, "api/queues")
        check(status == 200, "/api/queues answers 200 beside dlq:{}", f"({status})")
        check(isinstance(body, dict) and body.get("skipped_queues") == 1,
              "/api/queues counts the empty name dlq:{} as skipped", f"{body!r:.300}")
        status, text, _ = call(srv.url, "metrics")
        check("dlq_skipped_queues 1" in str(text), "/metrics counts the empty name as skipped",
              f"{str(text)[-300:]!r}")
    finally:
        srv.stop()


def wrong_types(args, url, r, q):
    """Foreign keys of another type at the names of a queue's lists: a string at the dead
    list of a queue found through its corrupt list, a hash at the corrupt list of another.
    Monitoring must go on for the normal queue and count the two it cannot read."""
    r.flushdb()
    r.rpush(dead_key(q), envelope(q, {"n": 1}, "boom"), envelope(q, {"n": 2}, "boom"))
    r.set(dead_key("str-dead"), "not a list")
    r.rpush(dead_key("str-dead") + ":corrupt", "junk")
    r.rpush(dead_key("hash-corrupt"), envelope("hash-corrupt", {"n": 1}, "boom"))
    r.hset(dead_key("hash-corrupt") + ":corrupt", "a", "b")

    srv = Serve(args.dlqctl, url)
    try:
        status, body, _ = call(srv.url, "metrics")
        text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
        check(status == 200, "wrong types: /metrics answers 200", f"({status} {text[:300]!r})")
        check(f'dlq_entries{{queue="{q}",list="dead"}} 2' in text,
              "wrong types: /metrics has the normal queue", f"{text[:600]!r}")
        check("dlq_skipped_queues 2" in text, "wrong types: /metrics counts the two",
              f"{text[-600:]!r}")
        status, body, _ = call(srv.url, "api/queues")
        check(status == 200, "wrong types: /api/queues answers 200", f"({status} {body!r:.300})")
        names = [x["name"] for x in body.get("queues", [])] if isinstance(body, dict) else []
        check(q in names, "wrong types: /api/queues lists the normal queue", f"{names!r}")
    finally:
        srv.stop()
    for argv in (["metrics"], ["stats"]):
        p = subprocess.run([args.dlqctl, "--store", url, *argv], capture_output=True, timeout=60)
        check(p.returncode == 0, f"wrong types: dlqctl {argv[0]} exits 0",
              f"(rc {p.returncode}: {p.stderr!r:.300})")
        check(q.encode() in p.stdout, f"wrong types: dlqctl {argv[0]} shows the normal queue",
              f"{p.stdout!r:.300}")


def forged_log_line(args, url, r):
    """Round 10: a queue name holding a line break reached `dlqctl serve`'s log raw through
    the library's own messages (Options::log: [dlq.audit], [dlq.retention]), where the
    console's own lines show it as '?'. Here the queue's audit key is a foreign string, so the
    console's delete logs "[dlq.audit] ... could not be written" with the name: its second
    line read as a line of its own, "<time> info [dlq.http] FORGED ..."."""
    r.flushdb()
    forged = "2026-01-01T00:00:00Z info [dlq.http] FORGED line"
    q = "evil\n" + forged
    e = envelope(q, {"n": 1}, "boom")
    r.rpush(dead_key(q), e)
    r.set(dead_key(q) + ":audit", "not a stream")
    srv = Serve(args.dlqctl, url)
    try:
        status, body, _ = call(srv.url, "api/delete", {"queue": q, "ids": [json.loads(e)["id"]]})
        check(status == 200 and body.get("deleted") == 1, "forged log: the delete is done",
              f"({status} {body!r:.300})")
    finally:
        srv.stop()
    log = srv.stderr()
    check("[dlq.audit]" in log, "forged log: the failed audit write is logged", f"{log[-600:]!r}")
    lines = log.splitlines()
    check(not any(line.startswith(forged) for line in lines),
          "forged log: no line of the log is the queue name's second line",
          f"{[line for line in lines if 'FORGED' in line]!r:.600}")


if __name__ == "__main__":
    main()
