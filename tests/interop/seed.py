#!/usr/bin/python3
"""The Python seed's Redis format, for interop tests (synchronous redis client).

Writes and replays exactly as dead_letter_seed_readable.py does (send_to_dlq, peek_dlq,
replay_one), with the seed's key layout under a prefix: dlq:<queue> and queue:<queue>.

  seed.py write URL PREFIX QUEUE    push the sample entries; print their payloads as
                                    json.dumps wrote them, one JSON string per line
  seed.py replay URL PREFIX QUEUE   peek every entry, then replay_one until empty; print
                                    {"entries": [...], "replayed": [...]} as JSON
  seed.py bench URL PREFIX QUEUE N  time the seed's replay_all over N entries of ~300 B;
                                    print entries/s
Run with /usr/bin/python3 (Debian's python3-redis).
"""
from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any

import redis

SAMPLES: list[Any] = [
    {"order": 42, "amount": 12.5, "currency": "EUR"},
    {"big": 12345678901234567, "max": 2**63 - 1, "min": -(2**63), "huge": 2**70},
    {"empty_list": [], "empty_object": {}, "nested": [[], {}, [1, [2, [3]]]]},
    {"z": 1, "a": 2, "m": {"y": 1, "b": 2}},
    {"text": "café 😀 / \\ \"quoted\" \u0000 nul", "path": "a/b"},
    [1, 2, 3],
    "just a string",
    None,
    {"float": 1.5e300, "neg": -0.0, "t": True, "f": False},
]


def dlq_key(prefix: str, queue: str) -> str:
    return f"{prefix}dlq:{queue}"


def queue_key(prefix: str, queue: str) -> str:
    return f"{prefix}queue:{queue}"


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def wrap_dlq_entry(original_payload, queue_name, error, attempt=1, worker=""):
    return {
        "original_payload": original_payload,
        "queue": queue_name,
        "error": error,
        "attempt": attempt,
        "worker": worker,
        "dead_lettered_at": _now_iso(),
    }


def send_to_dlq(rds, prefix, queue_name, original_payload, error, attempt=1, worker=""):
    entry = wrap_dlq_entry(original_payload, queue_name, error, attempt, worker)
    rds.rpush(dlq_key(prefix, queue_name), json.dumps(entry, default=str))


def peek_dlq(rds, prefix, queue_name, start=0, count=10):
    raw_items = rds.lrange(dlq_key(prefix, queue_name), start, start + count - 1)
    return [json.loads(item) for item in raw_items]


def replay_one(rds, prefix, queue_name):
    raw = rds.lpop(dlq_key(prefix, queue_name))
    if raw is None:
        return None
    entry = json.loads(raw)
    original = entry.get("original_payload", entry)
    rds.rpush(queue_key(prefix, queue_name), json.dumps(original, default=str))
    return entry


def bench(rds, prefix, queue, n):
    import time
    rds.delete(dlq_key(prefix, queue), queue_key(prefix, queue))
    pipe = rds.pipeline(transaction=False)
    for i in range(n):
        entry = wrap_dlq_entry({"job": i, "pad": "x" * 240}, queue, "timeout", 3, "w")
        pipe.rpush(dlq_key(prefix, queue), json.dumps(entry, default=str))
    pipe.execute()
    start = time.perf_counter()
    count = 0
    while replay_one(rds, prefix, queue) is not None:  # the seed's replay_all
        count += 1
    print(f"{count / (time.perf_counter() - start):.0f}")
    rds.delete(dlq_key(prefix, queue), queue_key(prefix, queue))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 6 and argv[1] == "bench":
        return bench(redis.Redis.from_url(argv[2], socket_timeout=10), argv[3], argv[4],
                     int(argv[5]))
    if len(argv) != 5 or argv[1] not in ("write", "replay"):
        print(__doc__, file=sys.stderr)
        return 2
    _, mode, url, prefix, queue = argv
    rds = redis.Redis.from_url(url, socket_timeout=10)
    if mode == "write":
        for i, payload in enumerate(SAMPLES):
            send_to_dlq(rds, prefix, queue, payload, f"error {i}: payment timeout",
                        attempt=i + 1, worker=f"py-worker-{i}")
            print(json.dumps(json.dumps(payload, default=str)))
        return 0
    entries = peek_dlq(rds, prefix, queue, 0, 10000)
    for e in entries:  # the fields the seed's readers rely on
        for field in ("original_payload", "queue", "error", "attempt", "worker",
                      "dead_lettered_at"):
            if field not in e:
                raise SystemExit(f"entry lacks {field}: {e}")
        datetime.fromisoformat(e["dead_lettered_at"])
    for _ in range(100000):
        if replay_one(rds, prefix, queue) is None:
            break
    replayed = [r.decode() for r in rds.lrange(queue_key(prefix, queue), 0, -1)]
    print(json.dumps({"entries": entries, "replayed": replayed}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
