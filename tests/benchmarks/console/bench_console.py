#!/usr/bin/python3
"""Console benchmarks, as ratios against baselines measured in the same run on a private
redis-server started here (medians over interleaved rounds):

  1. first page (50 entries) of a 1M-entry queue vs of a 1k-entry queue: must be ~1 (the
     page reads 50 entries whatever the length);
  2. a filtered page of the 1M queue (the match is rare: the request examines its bound of
     20 000 entries) vs reading the same 20 000 entries with LRANGE in pages of 500 from
     Python (the floor for any client);
  3. replay of 100k entries through the API (POST /api/replay, poll until done) vs the
     library directly (`dlqctl replay --all`, the same replay loop without HTTP).

    tests/benchmarks/console/bench_console.py --dlqctl BUILD/examples/dlqctl/dlqctl [--rounds 3]

Build Release for real numbers. Needs redis-server and python3-redis.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "http"))
from console_support import Serve, call, dead_key, envelope, fill, source_key, wait_operation  # noqa: E402

import redis  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def timed(f, n=1):
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t0) / n


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=120) as resp:
        return json.loads(resp.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dlq-bench-console-")
    port = free_port()
    subprocess.run(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                    "--dir", tmp, "--daemonize", "yes", "--pidfile", f"{tmp}/pid", "--logfile", f"{tmp}/log"], check=True)
    url = f"redis://127.0.0.1:{port}/0"
    r = redis.Redis.from_url(url)
    for _ in range(100):
        try:
            r.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    try:
        fill(r, "big", 1_000_000, lambda i: envelope("big", {"n": i, "pad": "x" * 100}, "rare" if i == 999_999 else "common"), chunk=10000)
        fill(r, "small", 1_000, lambda i: envelope("small", {"n": i, "pad": "x" * 100}, "common"))
        srv = Serve(args.dlqctl, url, "--max-operations", "1")
        base = srv.url
        rows = {k: [] for k in ("page_small", "page_big", "filtered", "lrange", "replay_api", "replay_lib")}
        try:
            for rnd in range(args.rounds):
                rows["page_small"].append(timed(lambda: get(base, "api/entries?queue=small&limit=50"), 20))
                rows["page_big"].append(timed(lambda: get(base, "api/entries?queue=big&limit=50"), 20))
                rows["filtered"].append(timed(lambda: get(base, "api/entries?queue=big&limit=50&error=rare"), 3))

                def lrange():
                    for s in range(0, 20000, 500):
                        r.lrange(dead_key("big"), s, s + 499)
                rows["lrange"].append(timed(lrange, 3))

                for mode in ("api", "lib"):
                    r.delete(dead_key("rq"), source_key("rq"))
                    fill(r, "rq", 100_000, lambda i: envelope("rq", {"n": i, "pad": "x" * 100}, "boom"), chunk=10000)
                    t0 = time.perf_counter()
                    if mode == "api":
                        status, op, _ = call(base, "api/replay", {"queue": "rq", "all": True})
                        op = wait_operation(base, op["id"], timeout=600)
                        assert op["report"]["replayed"] == 100_000, op
                    else:
                        p = subprocess.run([args.dlqctl, "--store", url, "replay", "rq", "--all"], capture_output=True)
                        assert p.returncode == 0 and p.stdout.split()[-1] == b"100000", p
                    rows["replay_" + mode].append(time.perf_counter() - t0)
                    assert r.llen(source_key("rq")) == 100_000
                print(f"round {rnd + 1} done", file=sys.stderr)
        finally:
            srv.stop()
        m = {k: statistics.median(v) for k, v in rows.items()}
        print(f"console benchmarks, medians of {args.rounds} rounds (redis-server on loopback, 1M entries of ~230 B)")
        print(f"  first page, 1k queue          {m['page_small'] * 1e3:8.2f} ms")
        print(f"  first page, 1M queue          {m['page_big'] * 1e3:8.2f} ms   ratio to 1k queue: {m['page_big'] / m['page_small']:.2f}")
        print(f"  filtered page, 1M (20k exam.) {m['filtered'] * 1e3:8.2f} ms")
        print(f"  LRANGE 20k in pages of 500    {m['lrange'] * 1e3:8.2f} ms   filtered page / LRANGE: {m['filtered'] / m['lrange']:.2f}")
        print(f"  replay 100k through the API   {m['replay_api']:8.3f} s  ({100000 / m['replay_api']:,.0f}/s)")
        print(f"  replay 100k, dlqctl replay    {m['replay_lib']:8.3f} s  ({100000 / m['replay_lib']:,.0f}/s)   API / library: {m['replay_api'] / m['replay_lib']:.3f}")
    finally:
        try:
            with open(f"{tmp}/pid") as f:
                os.kill(int(f.read()), 15)
        except OSError:
            pass
        time.sleep(0.2)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
