#!/usr/bin/python3
"""Round 10 of issue 27 (not registered with ctest): the console's POST /api/discard by filter
while another client pushes matching entries (from the moment the run registered its bound)
and dlqctl replays matching ones: none pushed after the start may be deleted.
ARGS: console base URL, redis URL, dlqctl path. 4 runs of 8000 entries: 0 defects."""
import json, subprocess, sys, threading, time, uuid, urllib.request
import redis
base, url, dlqctl = sys.argv[1], sys.argv[2], sys.argv[3]
r = redis.Redis.from_url(url)
Q = "cdisc"; DK = "dlq:{" + Q + "}"; SK = "queue:{" + Q + "}"
def env(err):
    i = str(uuid.uuid4())
    e = {"original_payload": {"x": i}, "queue": Q, "error": err, "attempt": 1, "worker": "w",
         "dead_lettered_at": "2026-12-07T07:00:00+00:00", "id": i}
    return e["id"], json.dumps(e)
def post(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=60).read())
bad = 0
for run in range(4):
    r.delete(DK, SK, DK + ":audit", DK + ":runs")
    p = r.pipeline()
    for i in range(8000):
        p.rpush(DK, env("match" if i % 2 else "other")[1])
    p.execute()
    stop = False; pushed = []
    def push():
        while not stop:
            i_, t = env("match"); r.rpush(DK, t); pushed.append(i_)
    def remover():
        while not stop:
            subprocess.run([dlqctl, "--store", url, "replay", Q, "--error-contains", "match", "--count", "15"], capture_output=True)
    op = post("api/discard", {"queue": Q, "filter": {"error": "match"}})
    t0 = time.time()
    while not r.exists(DK + ":runs") and time.time() - t0 < 5: time.sleep(0.0005)
    th = [threading.Thread(target=push), threading.Thread(target=remover)]
    for t in th: t.start()
    while True:
        o = json.loads(urllib.request.urlopen(base + "api/operation?id=" + op["id"]).read())
        if o.get("state") not in ("running", "queued", "pending"): break
        time.sleep(0.05)
    stop = True
    for t in th: t.join()
    present = set(json.loads(x)["id"] for x in r.lrange(DK, 0, -1))
    replayed = set(json.loads(x)["x"] for x in r.lrange(SK, 0, -1))
    lost_late = [i for i in pushed if i not in present and i not in replayed]
    if lost_late: bad += 1
    print(f"run {run}: state {o.get('state')}, pushed after start {len(pushed)}, of them gone (neither in the list nor replayed) {len(lost_late)}; op {json.dumps({k: o.get(k) for k in ('requested','discarded','matched','examined')})[:200]}", flush=True)
print("runs with a defect:", bad)
