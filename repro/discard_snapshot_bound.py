#!/usr/bin/python3
"""Round 10 of issue 27 (not registered with ctest): `dlqctl discard --limit N` while another
client pushes matching entries (from the moment the run registered its bound in
<dead key>:runs) and dlqctl replays matching ones: no entry pushed after the start may be
deleted, never more than N. ARGS: redis URL, dlqctl path. 12 runs of 6000 entries:
0 defects. (A raw LREM remover is outside the contract, redis/scripts/snapshot.hpp.)"""
import json, subprocess, sys, threading, time, uuid
import redis
url, dlqctl = sys.argv[1], sys.argv[2]
r = redis.Redis.from_url(url)
Q = "dbound"; DK = "dlq:{" + Q + "}"
def env(err):
    e = {"original_payload": {"x": 1}, "queue": Q, "error": err, "attempt": 1, "worker": "w",
         "dead_lettered_at": "2026-12-07T07:00:00+00:00", "id": str(uuid.uuid4())}
    return e["id"], json.dumps(e)
bad = 0
for run in range(12):
    r.delete(DK, DK + ":audit", "queue:{" + Q + "}")
    start = set()
    p = r.pipeline()
    for i in range(6000):
        i_, t = env("match" if i % 2 else "other"); p.rpush(DK, t)
        if i % 2: start.add(i_)
    p.execute()
    stop = False; pushed = []
    def push():
        while not stop:
            i_, t = env("match"); r.rpush(DK, t); pushed.append(i_)
    def remover():  # another client removes matching entries near the head, one at a time
        while not stop:
            subprocess.run([dlqctl, "--store", url, "replay", Q, "--error-contains", "match", "--count", "25"], capture_output=True)
    limit = [100, 1000, 1400, 5000][run % 4]
    proc = subprocess.Popen([dlqctl, "--store", url, "discard", Q, "--error-contains", "match", "--limit", str(limit), "--yes", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t0 = time.time()
    while not r.exists(DK + ":runs") and proc.poll() is None and time.time() - t0 < 10:
        time.sleep(0.0005)
    snap = r.exists(DK + ":runs")
    th = [threading.Thread(target=push), threading.Thread(target=remover)]
    for t in th: t.start()
    so, se = proc.communicate(timeout=300)
    class O: pass
    out = O(); out.stdout, out.stderr, out.returncode = so, se, proc.returncode
    stop = True
    for t in th: t.join()
    ids = [json.loads(l).get("id") for l in out.stdout.decode().splitlines() if l.strip()]
    ids = [i for i in ids if i]
    late = len(set(ids) & set(pushed))
    notstart = len(set(ids) - start)
    over = len(ids) > limit
    if late or notstart or over or len(ids) != len(set(ids)): bad += 1
    print(f"run {run}: snapshot seen {snap}, limit {limit}, discarded {len(ids)}, of them pushed after the start {late}, not present at start {notstart}, rc {out.returncode}; {out.stderr.decode()[:150]!r}")
print("runs with a defect:", bad)
