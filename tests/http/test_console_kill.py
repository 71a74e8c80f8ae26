#!/usr/bin/python3
"""SIGKILL of `dlqctl serve` during a replay of 100k entries started through the API: every
entry is then exactly once in the dead list or the source list (the console is just another
client of the library, whose replay batches are atomic Redis scripts). A second console then
finishes the replay: all 100k in the source list, each once, in order.

    test_console_kill.py --dlqctl PATH      (ctest: fixture `redis`)
"""
import argparse
import json
import signal
import time

from console_support import (Serve, call, check, dead_key, envelope, fill, finish, redis_client,
                             redis_url, source_key, wait_operation)

DB = 12
N = 100_000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    url = redis_url(DB)
    r = redis_client(url)
    q = "console-kill"
    for k in (dead_key(q), source_key(q), dead_key(q) + ":corrupt"):
        r.delete(k)
    fill(r, q, N, lambda i: envelope(q, {"n": i}, "boom", worker=f"w{i % 7}"))

    for round_ in range(3):
        srv = Serve(args.dlqctl, url)
        status, op, _ = call(srv.url, "api/replay", {"queue": q, "all": True})
        check(status == 202, "replay started", f"{status} {op}")
        # kill it mid-way, at a different point each round
        target = 5000 + 30000 * round_
        deadline = time.time() + 120
        while r.llen(source_key(q)) < target and time.time() < deadline:
            time.sleep(0.001)
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait()
        dead, src = r.llen(dead_key(q)), r.llen(source_key(q))
        print(f"    round {round_ + 1}: killed with {src} replayed, {dead} still dead")
        check(0 < dead and dead + src == N, f"round {round_ + 1}: dead + source == N after SIGKILL", f"{dead} + {src}")
        in_src = [json.loads(x)["n"] for x in r.lrange(source_key(q), 0, -1)]
        in_dead = [json.loads(x)["original_payload"]["n"] for x in r.lrange(dead_key(q), 0, -1)]
        check(sorted(in_src + in_dead) == list(range(N)), f"round {round_ + 1}: every entry exactly once")
        check(in_src == list(range(len(in_src))), f"round {round_ + 1}: the source list holds the oldest, in order")

    # a new console finishes the job
    srv = Serve(args.dlqctl, url)
    try:
        status, op, _ = call(srv.url, "api/replay", {"queue": q, "all": True})
        op = wait_operation(srv.url, op["id"])
        check(op["state"] == "done", "the rest replayed", f"{op}")
    finally:
        srv.stop()
    in_src = [json.loads(x)["n"] for x in r.lrange(source_key(q), 0, -1)]
    check(in_src == list(range(N)) and r.llen(dead_key(q)) == 0, "all 100k in the source list, each once, in order")
    for k in (dead_key(q), source_key(q)):
        r.delete(k)
    finish("console SIGKILL")


if __name__ == "__main__":
    main()
