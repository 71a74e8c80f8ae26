#!/usr/bin/python3
"""The console's JSON API end to end: `dlqctl serve` on loopback over the test Redis, driven
through a real HTTP client (urllib), every endpoint, checked against the Redis lists.

    test_console_api.py --dlqctl PATH      (ctest: fixture `redis`)

Covers: queues with stats, entries paged with a continuation token over 100k entries (every
entry exactly once, first page as cheap as on a small list), every filter, one entry in full
(JSON pretty, binary as hex), replay by ids / filter / all with progress and a report that
says exactly what moved (byte-exact payloads in the source list), dry runs, to another queue,
paced replay cancelled, delete by ids, purge with the name typed back, corrupt list, recover,
/healthz, /metrics; bad input (bad JSON, wrong content type, bad ids, oversize bodies, unknown
queue, bad cursor, bad parameters) → JSON errors with 4xx codes and a stable code; the token
(401), read-only (403), loopback Host rule (403), no password in any answer or log line.
"""
import argparse
import base64
import datetime
import json
import os
import tempfile
import time

from console_support import (FAILURES, PrivateRedis, Serve, call, check, corrupt_key, dead_key, envelope,
                             fill, finish, redis_client, redis_url, source_key, wait_operation)

DB = 11


def error_of(status, body, code, http):
    return (status == http and isinstance(body, dict) and "error" in body
            and body["error"].get("code") == code and body["error"].get("message", "").startswith("[dlq.http]"))


def expect_error(resp, http, code, what):
    status, body, _ = resp
    check(error_of(status, body, code, http), what, f"(got {status} {body!r:.300})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    url = redis_url(DB)
    r = redis_client(url)
    for k in r.scan_iter("*console-*"):
        r.delete(k)

    now = datetime.datetime.now(datetime.timezone.utc)
    old = now - datetime.timedelta(hours=3)
    q = "console-orders"
    # 6 entries with distinct fields, one binary payload (dlq's base64 encoding), one corrupt.
    entries = [
        envelope(q, {"order": 1, "note": "alpha"}, "payment timeout", worker="w1", error_type="TimeoutError", job_id="job-1", when=old),
        envelope(q, {"order": 2}, "payment timeout", worker="w2", error_type="TimeoutError", job_id="job-2", when=old),
        envelope(q, {"order": 3, "note": "Needle"}, "card declined", worker="w1", error_type="CardError", job_id="job-3"),
        envelope(q, [1, 2, 3], "schema mismatch", worker="w3", error_type="ValueError", job_id="job-4"),
    ]
    binary = b"\x00\x01\xfe\xffbinary\n"
    bin_env = json.loads(envelope(q, base64.b64encode(binary).decode(), "bad bytes", worker="w9"))
    bin_env["payload_encoding"] = "base64"
    entries.append(json.dumps(bin_env))
    entries.append("this is not json")  # corrupt
    r.rpush(dead_key(q), *entries)
    ids = [json.loads(e)["id"] for e in entries[:5]]

    srv = Serve(args.dlqctl, url)
    base = srv.url
    try:
        # --- read endpoints ---------------------------------------------------------------
        status, body, hdrs = call(base, "healthz")
        check(status == 200 and body == {"status": "ok"}, "healthz", f"{status} {body}")
        status, body, hdrs = call(base, "")
        check(status == 200 and b"<title>dlq console</title>" in body if isinstance(body, bytes) else False, "page served", f"{status}")
        check("script-src 'self'" in hdrs.get("Content-Security-Policy", ""), "page has a CSP without inline script")
        status, body, _ = call(base, "console.js")
        check(status == 200 and b"innerHTML" not in body, "the script never uses innerHTML")
        status, body, _ = call(base, "api/queues")
        qs = {x["name"]: x for x in body["queues"]} if status == 200 else {}
        check(q in qs and qs[q]["dead"] == 6 and qs[q]["corrupt"] == 0, "queues: depth", f"{body!r:.300}")
        check(q in qs and qs[q]["oldest_age_seconds"] is not None and qs[q]["oldest_age_seconds"] > 3 * 3600 - 60,
              "queues: age of the oldest", f"{qs.get(q)}")
        check(q in qs and qs[q]["waiting"] == 0, "queues: waiting in the source list")
        status, body, _ = call(base, "api/queue?queue=" + q)
        check(status == 200 and body["dead"] == 6, "queue stats", f"{status} {body}")

        status, body, _ = call(base, "api/entries?queue=" + q)
        check(status == 200 and [e["id"] for e in body["entries"][:5]] == ids and len(body["entries"]) == 6
              and body["next"] is None and body["total"] == 6, "entries: all six, oldest first", f"{body!r:.400}")
        check(status == 200 and body["entries"][5]["ok"] is False and body["entries"][5]["problem"], "entries: corrupt one reported")
        filters = [("error=TIMEOUT", ids[0:2]), ("error_type=CardError", ids[2:3]), ("worker=w1", [ids[0], ids[2]]),
                   ("job_id=job-4", ids[3:4]), ("payload=needle", ids[2:3]), ("min_age=1h", ids[0:2]),
                   ("max_age=1h", ids[2:5]), ("error=payment&worker=w2", ids[1:2]), ("payload=binary", ids[4:5])]
        for qs_, want in filters:
            status, body, _ = call(base, f"api/entries?queue={q}&{qs_}")
            got = [e["id"] for e in body["entries"]] if status == 200 else None
            check(got == want and body["filtered"] is True, f"filter {qs_}", f"(got {got}, want {want})")
        # paging with a token, limit 2
        got, cursor, pages = [], "", 0
        while True:
            status, body, _ = call(base, f"api/entries?queue={q}&limit=2" + (f"&cursor={cursor}" if cursor else ""))
            pages += 1
            got += [e["id"] for e in body["entries"]]
            if not body["next"]:
                break
            cursor = urllib_quote(body["next"])
        check(got[:5] == ids and len(got) == 6 and pages >= 3, "paging by 2 sees each entry once", f"{got}")

        status, body, _ = call(base, f"api/entry?queue={q}&id={ids[0]}")
        check(status == 200 and body["payload_kind"] == "json" and json.loads(body["payload_text"]) == {"order": 1, "note": "alpha"}
              and "\n" in body["payload_text"], "entry: JSON payload pretty-printed", f"{body!r:.300}")
        check(status == 200 and base64.b64decode(body["payload_base64"]) == b'{"order":1,"note":"alpha"}', "entry: exact bytes")
        status, body, _ = call(base, f"api/entry?queue={q}&id={ids[4]}")
        check(status == 200 and body["payload_kind"] == "binary" and "00 01 fe ff" in body["payload_hex"]
              and base64.b64decode(body["payload_base64"]) == binary and "binary" in body["payload_text"],
              "entry: binary as hex plus printable text", f"{body!r:.400}")
        expect_error(call(base, f"api/entry?queue={q}&id=0190c000-0000-7000-8000-000000000000"), 404, "not_found", "entry: unknown id")

        # --- replay by ids: byte-exact into the source list ---------------------------------
        status, op, _ = call(base, "api/replay", {"queue": q, "ids": ids[0:2]})
        check(status == 202 and op["state"] in ("running", "done"), "replay ids accepted", f"{status} {op}")
        op = wait_operation(base, op["id"])
        check(op["state"] == "done" and op["report"]["replayed"] == 2 and op["report"]["skipped_total"] == 0,
              "replay ids: report", f"{op}")
        src = r.lrange(source_key(q), 0, -1)
        check(src == [b'{"order":1,"note":"alpha"}', b'{"order":2}'], "replay ids: payloads byte-exact in the source list", f"{src}")
        check(r.llen(dead_key(q)) == 4, "replay ids: removed from the dead list")

        # --- dry run by filter, then to another queue ----------------------------------------
        status, op, _ = call(base, "api/replay", {"queue": q, "filter": {"worker": "w1"}, "dry_run": True})
        op = wait_operation(base, op["id"])
        check(op["state"] == "done" and op["report"]["replayed"] == 1 and op["report"]["dry_run"] and r.llen(dead_key(q)) == 4,
              "dry run counts and moves nothing", f"{op}")
        status, op, _ = call(base, "api/replay", {"queue": q, "filter": {"error_type": "CardError"}, "to": "console-other"})
        op = wait_operation(base, op["id"])
        check(op["state"] == "done" and op["report"]["replayed"] == 1 and op["report"]["set_aside"] == 1
              and r.lrange(source_key("console-other"), 0, -1) == [b'{"order":3,"note":"Needle"}'],
              "replay by filter to another queue (the corrupt item met is set aside)", f"{op}")
        # replay all: the corrupt item is set aside, the binary payload decoded byte-exact
        status, op, _ = call(base, "api/replay", {"queue": q, "all": True})
        op = wait_operation(base, op["id"])
        check(op["state"] == "done" and op["report"]["replayed"] == 2 and op["report"]["set_aside"] == 0,
              "replay all: report", f"{op}")
        check(r.lrange(source_key(q), -1, -1) == [binary], "replay all: binary payload byte-exact")
        check(r.llen(dead_key(q)) == 0 and r.llen(corrupt_key(q)) == 1, "replay all: dead list empty, corrupt set aside")
        status, body, _ = call(base, f"api/corrupt?queue={q}")
        check(status == 200 and len(body["items"]) == 1 and body["items"][0]["raw_text"] == "this is not json",
              "corrupt list shown", f"{body!r:.300}")
        status, body, _ = call(base, "api/operations")
        check(status == 200 and len(body["operations"]) >= 4, "operations listed")

        # --- delete, purge, recover --------------------------------------------------------
        fill(r, q, 5, lambda i: envelope(q, {"d": i}, "to delete"))
        status, body, _ = call(base, f"api/entries?queue={q}")
        dids = [e["id"] for e in body["entries"]]
        status, body, _ = call(base, "api/delete", {"queue": q, "ids": dids[:2] + ["0190c000-0000-7000-8000-000000000000"]})
        check(status == 200 and body["deleted"] == 2 and len(body["missing"]) == 1 and r.llen(dead_key(q)) == 3,
              "delete by ids", f"{status} {body}")
        expect_error(call(base, "api/purge", {"queue": q, "confirm": "wrong"}), 400, "confirmation_mismatch", "purge: name must be typed back")
        check(r.llen(dead_key(q)) == 3, "purge refused deletes nothing")
        status, body, _ = call(base, "api/purge", {"queue": q, "confirm": q})
        check(status == 200 and body["deleted"] == 3 and r.llen(dead_key(q)) == 0, "purge", f"{body}")
        status, body, _ = call(base, "api/purge", {"queue": q, "confirm": q, "list": "corrupt"})
        check(status == 200 and body["deleted"] == 1 and r.llen(corrupt_key(q)) == 0, "purge corrupt", f"{body}")
        r.rpush(dead_key(q), envelope(q, {"x": 1}, "again"))
        status, body, _ = call(base, "api/recover", {"queue": q})
        check(status == 200 and body["fixed"] == 0, "recover (Redis lists: nothing to fix)", f"{status} {body}")

        # --- delete by filter (a background operation; dry run counts) ----------------------
        r.delete(dead_key(q))
        r.rpush(dead_key(q), *[envelope(q, {"k": i}, "disc-a" if i % 3 == 0 else "keep", worker="w5") for i in range(30)])
        status, op, _ = call(base, "api/discard", {"queue": q, "filter": {"error": "DISC-A"}, "dry_run": True})
        op = wait_operation(base, op["id"])
        check(op["kind"] == "delete" and op["report"]["matched"] == 10 and op["report"]["deleted"] == 0 and r.llen(dead_key(q)) == 30,
              "discard dry run counts, deletes nothing", f"{op}")
        status, op, _ = call(base, "api/discard", {"queue": q, "filter": {"error": "disc-a"}})
        op = wait_operation(base, op["id"])
        left = [json.loads(x)["original_payload"]["k"] for x in r.lrange(dead_key(q), 0, -1)]
        check(op["state"] == "done" and op["report"]["deleted"] == 10 and left == [i for i in range(30) if i % 3],
              "discard by filter deletes exactly the matches, the rest in order", f"{op} {left}")
        expect_error(call(base, "api/discard", {"queue": q, "filter": {}}), 400, "bad_request", "discard without a condition")
        r.delete(dead_key(q))
        r.rpush(dead_key(q), envelope(q, {"x": 1}, "again"))

        # --- metrics ------------------------------------------------------------------------
        status, body, hdrs = call(base, "metrics")
        text = body.decode() if isinstance(body, bytes) else str(body)
        check(status == 200 and f'dlq_entries{{queue="{q}",list="dead"}} 1' in text and "# TYPE dlq_entries gauge" in text,
              "metrics: dlq_entries", text[:300])

        # --- bad input ------------------------------------------------------------------------
        expect_error(call(base, "api/replay", raw=b"{not json", headers={"Content-Type": "application/json"}), 400, "bad_json", "bad JSON")
        expect_error(call(base, "api/replay", raw=b"[1,2]", headers={"Content-Type": "application/json"}), 400, "bad_json", "JSON array body")
        expect_error(call(base, "api/replay", raw=b"queue=x", headers={"Content-Type": "application/x-www-form-urlencoded"}),
                     415, "unsupported_media_type", "form post refused")
        expect_error(call(base, "api/replay", {"queue": q, "ids": []}), 400, "bad_field", "empty ids")
        expect_error(call(base, "api/replay", {"queue": q, "ids": [5]}), 400, "bad_id", "non-string id")
        expect_error(call(base, "api/replay", {"queue": q, "ids": ["a"], "all": True}), 400, "bad_request", "two modes at once")
        expect_error(call(base, "api/replay", {"queue": q, "all": True, "rate": -1}), 400, "bad_field", "negative rate")
        expect_error(call(base, "api/replay", {"all": True}), 400, "missing_field", "no queue")
        expect_error(call(base, "api/replay", {"queue": "console-nope", "all": True}), 404, "unknown_queue", "replay: unknown queue")
        expect_error(call(base, "api/entries?queue=console-nope"), 404, "unknown_queue", "entries: unknown queue")
        expect_error(call(base, "api/entries"), 400, "missing_parameter", "entries: no queue")
        expect_error(call(base, f"api/entries?queue={q}&cursor=%%%"), 400, "invalid_argument", "bad cursor")
        expect_error(call(base, f"api/entries?queue={q}&limit=100000"), 400, "bad_parameter", "page too large")
        expect_error(call(base, f"api/entries?queue={q}&limit=abc"), 400, "bad_parameter", "limit not a number")
        expect_error(call(base, f"api/entries?queue={q}&min_age=soon"), 400, "bad_parameter", "bad age")
        expect_error(call(base, "api/operation?id=op-999999"), 404, "unknown_operation", "unknown operation")
        expect_error(call(base, "api/replay", {"queue": q, "ids": ["x"] * 1001}), 413, "too_many_ids", "too many ids")
        big = b'{"queue":"' + b"x" * (2 << 20) + b'"}'
        status, body, _ = call(base, "api/replay", raw=big, headers={"Content-Type": "application/json"})
        check(status == 413, "oversize body refused with 413", f"{status} {body!r:.200}")
        expect_error(call(base, "api/queues", headers={"Host": "attacker.example:80"}), 403, "forbidden_host", "non-loopback Host refused")
        status, body, _ = call(base, "api/nothing")
        check(status == 404 and isinstance(body, dict) and body["error"]["code"] == "not_found", "unknown route: JSON 404", f"{status} {body}")
        status, body, _ = call(base, "api/entries?queue=" + "x" * 9000)
        check(status == 414 and isinstance(body, dict) and body["error"]["code"] == "uri_too_long"
              and "longer than 8 KiB" in body["error"]["message"]
              and " : " not in body["error"]["message"],
              "a target over 8 KiB: JSON 414 that says what was too long", f"{status} {body}")
        status, body, _ = call(base, "healthz")
        check(status == 200, "still healthy after bad input")
    finally:
        code = srv.stop()
        log = srv.stderr()
    check(code == 0, "serve exits 0 on SIGTERM", f"{code} {log[-500:]}")
    check("operation op-1: replay ids" in log and "purge 'console-orders' dead list: 3 deleted" in log, "mutations logged", log[-800:])

    # --- 100k entries: paging with the token sees every entry exactly once ------------------
    big_q = "console-big"
    n = 100_000
    fill(r, big_q, n, lambda i: envelope(big_q, {"n": i}, "timeout" if i % 1000 == 7 else "other", worker=f"w{i % 10}"))
    srv = Serve(args.dlqctl, url)
    try:
        base = srv.url
        t0 = time.perf_counter()
        status, body, _ = call(base, f"api/entries?queue={big_q}&limit=50")
        first = time.perf_counter() - t0
        check(status == 200 and len(body["entries"]) == 50 and body["examined"] == 50 and body["total"] == n,
              "100k: first page reads 50 entries, not the list", f"{body.get('examined')}")
        seen, cursor, pages = [], None, 0
        t0 = time.perf_counter()
        while True:
            status, body, _ = call(base, f"api/entries?queue={big_q}&limit=500" + (f"&cursor={urllib_quote(cursor)}" if cursor else ""))
            if not check(status == 200, "100k paging page ok", f"{status} {body!r:.200}"):
                break
            seen += [e["preview"] for e in body["entries"]]
            pages += 1
            cursor = body["next"]
            if not cursor:
                break
        all_pages = time.perf_counter() - t0
        nums = [json.loads(p)["n"] for p in seen]
        check(nums == list(range(n)), "100k: paging sees every entry exactly once, in order", f"{len(nums)} pages={pages}")
        # a filtered scan is bounded per request and resumable: 100 matches in 100k
        matches, cursor, calls, max_examined = [], None, 0, 0
        while True:
            status, body, _ = call(base, f"api/entries?queue={big_q}&error=timeout&limit=500" + (f"&cursor={urllib_quote(cursor)}" if cursor else ""))
            if not check(status == 200, "100k filtered page ok", f"{status} {body!r:.300}"):
                break
            calls += 1
            max_examined = max(max_examined, body["examined"])
            matches += [json.loads(e["preview"])["n"] for e in body["entries"]]
            cursor = body["next"]
            if not cursor:
                break
        check(matches == [i for i in range(n) if i % 1000 == 7], "100k: filtered scan finds every match once", f"{len(matches)}")
        check(max_examined <= 20000 and calls >= 5, "100k: each filtered request examines at most 20000", f"{max_examined} {calls}")
        # paging goes on correctly while the head is replayed away
        status, body, _ = call(base, f"api/entries?queue={big_q}&limit=500")
        cursor = body["next"]
        status, op, _ = call(base, "api/replay", {"queue": big_q, "all": True, "limit": 600})
        op = wait_operation(base, op["id"])
        status, body, _ = call(base, f"api/entries?queue={big_q}&limit=10&cursor={urllib_quote(cursor)}")
        check([json.loads(e["preview"])["n"] for e in body["entries"]] == list(range(600, 610)),
              "paging resumes at the right entry after the head moved", f"{[e['preview'] for e in body['entries']]}")
        # delete by filter over the big queue: the 99 'timeout' entries left (n = 7 was among
        # the 600 replayed), among 99 400
        status, op, _ = call(base, "api/discard", {"queue": big_q, "filter": {"error": "timeout"}})
        op = wait_operation(base, op["id"], timeout=600)
        left = r.lrange(dead_key(big_q), 0, -1)
        check(op["state"] == "done" and op["report"]["deleted"] == 99 and len(left) == n - 600 - 99
              and not any(b'"timeout"' in x for x in left), "100k: discard by filter deletes the 99 matches", f"{op}")
        print(f"    100k: first page {first * 1000:.1f} ms, all {pages} pages of 500 in {all_pages:.2f} s")
    finally:
        srv.stop()

    # --- token, read-only, secrets ------------------------------------------------------------
    # On a private server: these checks set a password on it (CONFIG SET requirepass), which on
    # the shared fixture server would fail every test running at the same time with NOAUTH.
    shared_r = r
    private = PrivateRedis()
    url = private.url
    r = redis_client(url)
    big_q = "console-secret"
    fill(r, big_q, 50, lambda i: envelope(big_q, {"n": i}, "boom"))
    with tempfile.TemporaryDirectory() as d:
        tok = os.path.join(d, "token")
        with open(tok, "w") as f:
            f.write("s3cret-token-0123456789abcdef\n")
        os.chmod(tok, 0o644)  # readable by others: serve warns
        pw_url = url.replace("redis://", "redis://:hunter2hunter2@")
        r.config_set("requirepass", "hunter2hunter2")
        try:
            srv = Serve(args.dlqctl, pw_url, "--token-file", tok, "--read-only")
            base = srv.url
            try:
                expect_error(call(base, "api/queues"), 401, "unauthorized", "no token: 401")
                expect_error(call(base, "api/queues", token="wrong-token-0123456789"), 401, "unauthorized", "wrong token: 401")
                expect_error(call(base, "metrics"), 401, "unauthorized", "metrics need the token")
                status, body, _ = call(base, "api/queues", token="s3cret-token-0123456789abcdef")
                check(status == 200 and body["read_only"] is True and body["auth"] is True, "token: 200, read-only flagged", f"{status} {body!r:.200}")
                status, body, _ = call(base, "api/queues", headers={"X-DLQ-Token": "s3cret-token-0123456789abcdef"})
                check(status == 200, "token in X-DLQ-Token")
                before = r.llen(dead_key(big_q))
                expect_error(call(base, "api/replay", {"queue": big_q, "all": True}, token="s3cret-token-0123456789abcdef"),
                             403, "read_only", "read-only: replay refused on the server")
                expect_error(call(base, "api/purge", {"queue": big_q, "confirm": big_q}, token="s3cret-token-0123456789abcdef"),
                             403, "read_only", "read-only: purge refused")
                expect_error(call(base, "api/discard", {"queue": big_q, "filter": {"worker": "w1"}}, token="s3cret-token-0123456789abcdef"),
                             403, "read_only", "read-only: discard refused")
                expect_error(call(base, "api/replay", {"queue": big_q, "all": True}), 401, "unauthorized", "read-only without token: 401 first")
                check(r.llen(dead_key(big_q)) == before, "read-only moved nothing")
                status, body, _ = call(base, "api/queues", headers={"Host": "attacker.example"}, token="s3cret-token-0123456789abcdef")
                check(status == 200, "with a token any Host is fine (the token is the gate)")
            finally:
                srv.stop()
                log = srv.stderr()
            check("hunter2" not in log, "no password in the log", log[-300:])
            check("can be read by other users; chmod 600 it" in log, "warns about a readable token file", log[-300:])
            # the store refuses: the error names the store, never its password
            r.config_set("requirepass", "other-password-xyz")
            srv2 = None
            try:
                srv2 = Serve(args.dlqctl, pw_url)
                check(False, "serve must not start with a wrong password")
            except RuntimeError as e:
                check("hunter2" not in str(e) and "***" in str(e), "startup error masks the password", str(e)[:300])
            finally:
                if srv2:
                    srv2.stop()
        finally:
            r2 = redis_client(url.replace("redis://", "redis://:other-password-xyz@"))
            r2.config_set("requirepass", "")
        # non-loopback bind without a token refuses to start
        import subprocess
        p = subprocess.run([args.dlqctl, "--store", url, "serve", "--listen", "0.0.0.0:0"], capture_output=True, timeout=30)
        check(p.returncode == 1 and b"token" in p.stderr, "non-loopback listen without a token refused", f"{p.returncode} {p.stderr!r}")
        with open(tok, "w") as f:
            f.write("short\n")
        p = subprocess.run([args.dlqctl, "--store", url, "serve", "--listen", "127.0.0.1:0", "--token-file", tok], capture_output=True, timeout=30)
        check(p.returncode == 1 and b"shorter than 16" in p.stderr, "short token refused", f"{p.returncode} {p.stderr!r}")
    private.stop()

    for k in shared_r.scan_iter("*console-*"):
        shared_r.delete(k)
    finish("console API")


def urllib_quote(s):
    import urllib.parse
    return urllib.parse.quote(s, safe="")


if __name__ == "__main__":
    main()
