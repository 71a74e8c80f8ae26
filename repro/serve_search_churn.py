#!/usr/bin/python3
"""Round 10 of issue 27 (not registered with ctest): dlqctl serve's filtered /api/entries,
paged with its cursor (small pages, large entries among them so that reads are capped by
bytes), while other clients push, replay, discard and delete other entries of the same
queue. Every "keep" entry is present all along: each scan must return each exactly once
(or say restarted). ARGS: console base URL, redis URL, dlqctl path, keep entries, scans.
  repro/serve_search_churn.py http://127.0.0.1:18410/ redis://127.0.0.1:P/0 dlqctl 1500 6"""
import json, random, subprocess, sys, threading, time, urllib.parse, urllib.request, uuid
import redis

base, url, dlqctl, nkeep, nscans = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
r = redis.Redis.from_url(url)
Q = "churn"
DROP_PER_KEEP = int(sys.argv[6]) if len(sys.argv) > 6 else 2
DK = "dlq:{" + Q + "}"
r.delete(DK, "queue:{" + Q + "}", DK + ":audit")


def env(error, size=0):
    e = {"original_payload": {"pad": "p" * size}, "queue": Q, "error": error, "attempt": 1,
         "worker": "w", "dead_lettered_at": "2026-12-07T07:00:00+00:00", "id": str(uuid.uuid4())}
    return e["id"], json.dumps(e)


keep = set()
rng = random.Random(3)
pipe = r.pipeline()
for i in range(nkeep):
    big = 600_000 if rng.random() < 0.02 else 0  # 2 % of 600 KB: byte-capped reads
    for _ in range(rng.randint(0, DROP_PER_KEEP)):
        pipe.rpush(DK, env("drop-old", 300_000 if rng.random() < 0.02 else 0)[1])
    kid, text = env("keep-%d" % i, big)
    keep.add(kid)
    pipe.rpush(DK, text)
pipe.execute()
print("queue", r.llen(DK), "entries,", len(keep), "keep", flush=True)
stop = False
stats = {"pushed": 0, "replays": 0, "discards": 0, "deleted": 0}


def pusher():
    while not stop:
        p = r.pipeline()
        for _ in range(20):
            p.rpush(DK, env("drop-new", 300_000 if rng.random() < 0.01 else 0)[1])
        p.execute()
        stats["pushed"] += 20
        time.sleep(0.2)


def run(*argv):
    subprocess.run([dlqctl, "--store", url, *argv], capture_output=True, timeout=120)


def replayer():
    while not stop:
        run("replay", Q, "--error-contains", "drop", "--count", "40")
        stats["replays"] += 1


def discarder():
    while not stop:
        run("discard", Q, "--error-contains", "drop", "--limit", "30", "--yes")
        stats["discards"] += 1


def deleter():
    while not stop:
        ids = []
        for raw in r.lrange(DK, 0, 60):
            e = json.loads(raw)
            if e["error"].startswith("drop"):
                ids.append(e["id"])
        if ids:
            body = json.dumps({"queue": Q, "ids": ids[:10]}).encode()
            req = urllib.request.Request(base + "api/delete", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
            try:
                stats["deleted"] += json.loads(urllib.request.urlopen(req, timeout=60).read())["deleted"]
            except Exception as ex:
                print("delete:", ex, flush=True)
        time.sleep(0.02)


def scan(limit):
    seen, cursor, pages, restarted = [], None, 0, False
    while True:
        qs = {"queue": Q, "error": "keep", "limit": str(limit)}
        if cursor:
            qs["cursor"] = cursor
        with urllib.request.urlopen(base + "api/entries?" + urllib.parse.urlencode(qs), timeout=120) as f:
            page = json.loads(f.read())
        pages += 1
        restarted = restarted or page["restarted"]
        seen += [e["id"] for e in page["entries"]]
        cursor = page["next"]
        if not cursor:
            return seen, pages, restarted


threads = [threading.Thread(target=t, daemon=True) for t in (pusher, replayer, discarder, deleter)]
for t in threads:
    t.start()
bad = 0
for k in range(nscans):
    t0 = time.time()
    seen, pages, restarted = scan([3, 7, 13, 50][k % 4])
    missing = len(keep - set(seen))
    doubled = len(seen) - len(set(seen))
    foreign = len(set(seen) - keep)
    if missing or foreign or (doubled and not restarted):
        bad += 1
    print(f"scan {k}: {pages} pages in {time.time()-t0:.1f} s, returned {len(seen)}, missing {missing},"
          f" doubled {doubled}, foreign {foreign}, restarted {restarted}; queue now {r.llen(DK)}", flush=True)
stop = True
time.sleep(1)
print("churn:", stats, "; scans with a defect:", bad)
