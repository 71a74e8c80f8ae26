#!/usr/bin/python3
"""`dlqctl serve` over 48 entries of 4 MiB each (issue 27): a filtered /api/entries scan
that examines all of them and /api/entry of the last one must not hold a whole window of
large entries at once, alone or 12 at a time. Then (round 7) 600 small entries followed by
24 of 4 MiB, in the dead and the corrupt list: reads sized by the entries seen so far asked
for 516 entries after the small ones and held all 24 large ones at once; reads bounded by
bytes on the server do not. Measures the serve process's peak memory (VmHWM) per request
kind and prints it.

    test_console_large_batches.py --dlqctl PATH      (ctest: fixture `redis`)
"""
import argparse
import concurrent.futures
import os
import time

from console_support import (Serve, call, check, corrupt_key, dead_key, envelope, finish,
                             redis_client, redis_url)

DB = 6
MIB = 1 << 20
COUNT = 48
SIZE = 4 * MIB
# What one request may add to the peak: a few entries in flight (each is held as the reply,
# the stored bytes and the parsed payload) and the page's byte budget; a window of 48
# whole entries (192 MiB stored, ~380 MiB held: about 8 MiB an entry was measured before
# the reads were sized by bytes) is far above. 48, not more: every request reads them all,
# 15 requests in all, and the sanitizer build runs this too.
BOUND = 160 * MIB
# Under AddressSanitizer freed blocks wait in a quarantine (256 MiB by default) before they
# are reused, so a scan that frees every entry it read grows the peak by the quarantine:
# keep it small for the measured process (use-after-free is still found for recent frees).
SERVE_ENV = dict(os.environ,
                 ASAN_OPTIONS=":".join(filter(None, [os.environ.get("ASAN_OPTIONS", ""),
                                                     "quarantine_size_mb=16"])))


def hwm(pid):
    """VmHWM (peak resident memory) of the process in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def reset_hwm(pid):
    """Resets the peak to the current RSS (Linux: write 5 to clear_refs); False if refused."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure(srv, what, path):
    pid = srv.proc.pid
    reset_hwm(pid)
    before = hwm(pid)
    began = time.monotonic()
    status, body, _ = call(srv.url, path, timeout=300)
    grown = hwm(pid) - before
    print(f"  {what}: status {status}, peak +{grown / MIB:.0f} MiB, "
          f"{time.monotonic() - began:.1f} s", flush=True)
    check(status == 200, f"{what} answers 200", f"({status})")
    check(grown < BOUND, f"{what}: peak memory grows by less than {BOUND // MIB} MiB",
          f"(+{grown / MIB:.0f} MiB)")
    return body


def growing(r, srv):
    """Round 7: 600 small entries, then 24 of 4 MiB (dead and corrupt lists)."""
    q = "growing"
    pipe = r.pipeline()
    for i in range(600):
        item = envelope(q, {"s": "x"}, f"boom {i}", entry_id=f"s-{i}")
        pipe.rpush(dead_key(q), item)
        pipe.rpush(corrupt_key(q), item)
    pipe.execute()
    for i in range(24):
        item = envelope(q, {"blob": "a" * SIZE}, f"boom {i}", entry_id=f"big-{i}")
        r.rpush(dead_key(q), item)
        r.rpush(corrupt_key(q), item)
    page = measure(srv, "growing: filtered /api/entries", f"api/entries?queue={q}&error=nomatch")
    if page:
        check(page["entries"] == [] and page["next"] is None, "growing: all examined, none matches",
              str(page)[:200])
    entry = measure(srv, "growing: /api/entry of the last entry", f"api/entry?queue={q}&id=big-23")
    if entry:
        check(entry.get("id") == "big-23", "growing: the last entry is found")
    page = measure(srv, "growing: /api/corrupt", f"api/corrupt?queue={q}&start=590&limit=50")
    if page:
        check(len(page["items"]) >= 11 and page["items"][10]["id"] == "big-0",
              "growing: /api/corrupt reads past the small items", str(len(page["items"])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    url = redis_url(DB)
    r = redis_client(url)
    r.flushdb()
    q = "large-batches"
    try:
        for i in range(COUNT):
            r.rpush(dead_key(q), envelope(q, {"blob": "a" * SIZE}, f"boom {i}", entry_id=f"big-{i}"))
        srv = Serve(args.dlqctl, url, env=SERVE_ENV)
        try:
            status, _, _ = call(srv.url, "api/queues")  # warm up: pools, first allocations
            check(status == 200, "queues answered")
            # a filter nothing matches: the scan examines every entry
            page = measure(srv, "filtered /api/entries", f"api/entries?queue={q}&error=nomatch")
            if page:
                check(page["entries"] == [], "no entry matches", str(page.get("entries"))[:200])
            entry = measure(srv, "/api/entry of the last entry", f"api/entry?queue={q}&id=big-{COUNT - 1}")
            if entry:
                check(entry.get("id") == f"big-{COUNT - 1}", "the last entry is found")
            measure(srv, "unfiltered /api/entries", f"api/entries?queue={q}&limit=100")
            # 12 at once (6 scans, 6 lookups): each holds its own few entries
            pid = srv.proc.pid
            reset_hwm(pid)
            before = hwm(pid)
            paths = [f"api/entries?queue={q}&error=nomatch{i}" for i in range(6)] + \
                    [f"api/entry?queue={q}&id=big-{COUNT - 1 - i}" for i in range(6)]
            with concurrent.futures.ThreadPoolExecutor(len(paths)) as pool:
                statuses = list(pool.map(lambda p: call(srv.url, p, timeout=300)[0], paths))
            grown = hwm(pid) - before
            print(f"  12 requests at once: statuses {sorted(set(statuses))}, peak +{grown / MIB:.0f} MiB",
                  flush=True)
            check(statuses == [200] * len(paths), "12 requests at once answer 200", str(statuses))
            check(grown < 4 * BOUND, f"12 requests at once: peak grows by less than {4 * BOUND // MIB} MiB",
                  f"(+{grown / MIB:.0f} MiB)")
            growing(r, srv)
        finally:
            srv.stop()
    finally:
        r.flushdb()
    finish("test_console_large_batches")


if __name__ == "__main__":
    main()
