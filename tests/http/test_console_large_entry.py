#!/usr/bin/python3
"""`dlqctl serve` showing a 40 MiB entry: /api/entry keeps every field within its view limit
(the answer is small and says `truncated`), and the process's memory per request stays near
what reading the entry itself costs. Likewise a small payload nested 10,000 deep, which the
payload view lays out on indented lines (round 11 of issue 27: 20 KB made +200 MiB, 40 KB
+800 MiB, a 256 KiB one tens of GB, indentation quadratic in the depth). Prints the numbers it
measured.

    test_console_large_entry.py --dlqctl PATH      (ctest: fixture `redis`)
"""
import argparse
import json

from console_support import (Serve, call, check, dead_key, envelope, finish, redis_client,
                             redis_url)

DB = 8
MIB = 1 << 20


def memory(pid):
    """(VmRSS, VmHWM) of the process in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out["VmRSS"], out["VmHWM"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    url = redis_url(DB)
    r = redis_client(url)
    r.flushdb()
    q = "large-entry"
    body = envelope(q, {"blob": "a" * (40 * MIB)}, "boom", entry_id="big-1")
    r.rpush(dead_key(q), body)
    srv = Serve(args.dlqctl, url)
    try:
        status, _, _ = call(srv.url, "api/queues")  # warm up: pools, first allocations
        check(status == 200, "queues answered")
        rss0, hwm0 = memory(srv.proc.pid)
        sizes = []
        for _ in range(3):
            status, entry, hdrs = call(srv.url, "api/entry?queue=" + q + "&id=big-1", timeout=120)
            check(status == 200, "/api/entry answers 200", f"({status})")
            sizes.append(int(hdrs.get("Content-Length", "0")))
            if status == 200:
                check(entry["truncated"] is True, "the answer says truncated")
                for field in ("stored_text", "payload_text"):
                    check(len(entry[field].encode()) <= 256 * 1024 + 200, f"{field} within the view limit",
                          f"({len(entry[field])} bytes)")
        rss1, hwm1 = memory(srv.proc.pid)
        print(f"  envelope {len(body)} bytes; answers {sizes} bytes; serve RSS {rss0 / MIB:.0f} -> "
              f"{rss1 / MIB:.0f} MiB, peak {hwm0 / MIB:.0f} -> {hwm1 / MIB:.0f} MiB "
              f"(+{(hwm1 - hwm0) / MIB:.0f} MiB for 3 requests)", flush=True)
        check(max(sizes) < 2 * MIB, "each answer is under 2 MiB", f"({sizes})")
        # Reading the entry costs the reply, the stored bytes and the payload (3 x 40 MiB);
        # anything near the 300 MB of a whole envelope printed several times over fails.
        check(hwm1 - hwm0 < 160 * MIB, "peak memory grows by less than 160 MiB",
              f"(+{(hwm1 - hwm0) / MIB:.0f} MiB)")
        check(rss1 - rss0 < 64 * MIB, "memory goes back after the requests",
              f"(+{(rss1 - rss0) / MIB:.0f} MiB)")
    finally:
        srv.stop()
        r.flushdb()
    deep_payload(args.dlqctl, url, r, "deep-1", "[" * 10000 + "1" + "]" * 10000)
    # 240 KB, 250 deep around 120,000 elements: stored_text (the envelope printed with an
    # indent of 2) gave each element its 500 spaces: +70 MiB a request, 8 at once +433 MiB
    deep_payload(args.dlqctl, url, r, "wide-1", "[" * 250 + ",".join(["1"] * 120000) + "]" * 250)
    finish("test_console_large_entry")


def deep_payload(dlqctl, url, r, entry_id, deep):
    """/api/entry of a nested JSON payload `deep` (within the 256 KiB view): its views are
    cut to their limit, and the memory of laying them out is bounded by that limit, not by
    the depth times the size."""
    q = "deep-entry"
    depth = deep.index("1")  # the brackets before the first element
    body = envelope(q, 0, "boom", entry_id=entry_id).replace('"original_payload":0',
                                                             '"original_payload":' + deep, 1)
    r.rpush(dead_key(q), body)
    srv = Serve(dlqctl, url)
    try:
        status, _, _ = call(srv.url, "api/queues")
        check(status == 200, "queues answered")
        rss0, hwm0 = memory(srv.proc.pid)
        status, entry, _ = call(srv.url, f"api/entry?queue={q}&id={entry_id}", timeout=120)
        check(status == 200, "/api/entry of the deep payload answers 200", f"({status})")
        if status == 200:
            check(entry["payload_kind"] == "json", "the deep payload is shown as JSON")
            for field in ("payload_text", "stored_text"):
                check(len(entry[field].encode()) <= 256 * 1024 + 200,
                      f"its {field} within the view limit", f"({len(entry[field])})")
        rss1, hwm1 = memory(srv.proc.pid)
        print(f"  payload {len(deep)} bytes nested {depth} deep; serve peak {hwm0 / MIB:.0f} -> "
              f"{hwm1 / MIB:.0f} MiB (+{(hwm1 - hwm0) / MIB:.0f} MiB for 1 request)", flush=True)
        check(hwm1 - hwm0 < 32 * MIB, "a deep payload's view grows peak memory by < 32 MiB",
              f"(+{(hwm1 - hwm0) / MIB:.0f} MiB)")
    finally:
        srv.stop()
        r.flushdb()


if __name__ == "__main__":
    main()
