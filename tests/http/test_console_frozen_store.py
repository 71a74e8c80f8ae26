#!/usr/bin/python3
"""`dlqctl serve --timeout 1s` over a redis-server of its own frozen with SIGSTOP: 8 /metrics
at once are all answered (an error status) within about one timeout, as /healthz is, instead
of queueing behind each other's read of the store (round 7: they were answered four at a
time, the last after two timeouts on 2 cores).
After SIGCONT /metrics answers 200 again (a success is never reused).

    test_console_frozen_store.py --dlqctl PATH
"""
import argparse
import os
import signal
import threading
import time

from console_support import (PrivateRedis, Serve, call, check, dead_key, envelope, finish,
                             redis_client)

TIMEOUT_S = 2.0
ASKING = 8
# one read of the store (it fails after the timeout) shared by all: the timeout plus slack
# for a loaded machine (before: 4.1 s, four requests at a time behind each other)
BOUND_S = TIMEOUT_S + 1.0


def ask_at_once(base, path):
    """ASKING requests of `path` at once: a list of (status, seconds)."""
    results = [None] * ASKING
    start = threading.Barrier(ASKING)

    def one(i):
        start.wait()
        t0 = time.monotonic()
        status, _, _ = call(base, path, timeout=60)
        results[i] = (status, time.monotonic() - t0)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(ASKING)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    private = PrivateRedis()
    with open(os.path.join(private.dir, "pid")) as f:
        pid = int(f.read().strip())
    r = redis_client(private.url)
    r.rpush(dead_key("frozen-orders"), envelope("frozen-orders", {"n": 1}, "boom"))
    srv = Serve(args.dlqctl, private.url, "--timeout", f"{int(TIMEOUT_S * 1000)}ms")
    try:
        status, body, _ = call(srv.url, "metrics")
        check(status == 200 and "frozen-orders" in str(body), "/metrics answers 200 before the freeze")
        os.kill(pid, signal.SIGSTOP)
        try:
            for path in ("metrics", "healthz"):
                results = ask_at_once(srv.url, path)
                took = sorted(round(s, 2) for _, s in results)
                print(f"{ASKING} /{path} at once under a frozen store: seconds {took}, "
                      f"statuses {sorted(st for st, _ in results)}")
                check(all(st in (503, 504) for st, _ in results),
                      f"every /{path} answers 503/504 under a frozen store", f"{results}")
                check(max(s for _, s in results) < BOUND_S,
                      f"every /{path} answered within {BOUND_S} s (timeout {TIMEOUT_S} s)", f"{took}")
        finally:
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.2)
        status, _, _ = call(srv.url, "metrics")
        check(status == 200, "/metrics answers 200 again after SIGCONT", f"{status}")
    finally:
        srv.stop()
        private.stop()
    finish("console_frozen_store_redis")


if __name__ == "__main__":
    main()
