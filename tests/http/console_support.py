"""Shared pieces of the console tests (tests/http/*.py): start `dlqctl serve` on a free
loopback port, talk to it over HTTP (urllib), fill and read the test Redis (python3-redis).

The Redis server is the private one of the ctest fixture `redis`: its URL is in the file
named by $DLQ_TEST_REDIS_URL_FILE. Each test uses its own database number so that tests
running at once never see each other's keys.
"""
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import redis

FAILURES = []


def check(cond, what, detail=""):
    """Records a failed check (the test goes on, and exits 1 at the end)."""
    if not cond:
        FAILURES.append(what)
        print(f"    FAILED: {what} {detail}", flush=True)
    return cond


def finish(name):
    if FAILURES:
        print(f"{name}: {len(FAILURES)} check(s) failed:", *FAILURES, sep="\n  ")
        sys.exit(1)
    print(f"{name}: all checks passed")


def redis_url(db):
    """The shared test server's URL with database `db`. Tests run in parallel on one server,
    so each script owns its database: 4 details (browser), 6 large_batches, 7 test_dlqctl.py (seed layout), 8 large_entry,
    9 slow_serve, 10 audit and roles, 11 api, 12 kill, 13 browser, 14 prometheus, 15 foreign_keys;
    the C++ tests use database 0 under per-process key prefixes. A script that FLUSHDBs must
    own its database alone."""
    path = os.environ.get("DLQ_TEST_REDIS_URL_FILE")
    if not path:
        sys.exit("DLQ_TEST_REDIS_URL_FILE is not set: run through ctest (fixture `redis`)")
    with open(path) as f:
        base = f.read().strip()
    return re.sub(r"/\d+$", f"/{db}", base)


def redis_client(url):
    return redis.Redis.from_url(url)


def dead_key(queue):
    return "dlq:{" + queue + "}"


def source_key(queue):
    return "queue:{" + queue + "}"


def corrupt_key(queue):
    return "dlq:{" + queue + "}:corrupt"


def envelope(queue, payload_obj, error, worker="w1", attempt=3, error_type="", job_id="",
             when=None, entry_id=None):
    """One dead-letter entry as the Python seed / dlq write it (JSON payload embedded)."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    e = {"original_payload": payload_obj, "queue": queue, "error": error, "attempt": attempt,
         "worker": worker, "dead_lettered_at": when.isoformat(), "id": entry_id or str(uuid.uuid4())}
    if error_type:
        e["error_type"] = error_type
    if job_id:
        e["job_id"] = job_id
    return json.dumps(e, separators=(",", ":"))


def fill(r, queue, n, make, chunk=5000):
    """RPUSHes n envelopes make(i) to the queue's dead list, in pipelined chunks."""
    for start in range(0, n, chunk):
        p = r.pipeline(transaction=False)
        p.rpush(dead_key(queue), *[make(i) for i in range(start, min(n, start + chunk))])
        p.execute()


class PrivateRedis:
    """A redis-server of this test's own (tests/support/redis_server.sh) for checks that change
    the server itself (CONFIG SET requirepass): done on the shared fixture server they would
    make every test running at the same time fail with NOAUTH. Stopped by stop()."""

    def __init__(self):
        import tempfile
        self.script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support", "redis_server.sh")
        self.dir = tempfile.mkdtemp(prefix="dlq-console-redis-")
        subprocess.run([self.script, "start", self.dir], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(self.dir, "url")) as f:
            self.url = f.read().strip()
        import atexit
        atexit.register(self.stop)  # also when a check raises

    def stop(self):
        if self.dir:
            subprocess.run([self.script, "stop", self.dir], stdout=subprocess.DEVNULL)
            self.dir = None


class Serve:
    """`dlqctl serve` on 127.0.0.1 with a free port; stopped (SIGTERM) by stop()."""

    def __init__(self, dlqctl, store, *extra, env=None):
        self.proc = subprocess.Popen(
            [dlqctl, "--store", store, "serve", "--listen", "127.0.0.1:0", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        line = self.proc.stdout.readline().decode()
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+/)", line)
        if not m:
            self.proc.kill()
            err = self.proc.stderr.read().decode(errors="replace")
            raise RuntimeError(f"dlqctl serve did not start: {line!r} {err!r}")
        self.url = m.group(1)
        self.port = int(re.search(r":(\d+)/", self.url).group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def stderr(self):
        return self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else ""


def dlqctl_audit(dlqctl, url, queue, *extra):
    """The standard output of `dlqctl --store URL audit QUEUE EXTRA...` (it must succeed)."""
    return subprocess.run([dlqctl, "--store", url, "audit", queue, *extra],
                          capture_output=True, check=True, timeout=120).stdout.decode()


def call(base, path, body=None, token=None, headers=None, raw=None, method=None, timeout=60):
    """One request; returns (status, parsed JSON or None, response headers)."""
    h = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    if raw is not None:
        data = raw
    if token:
        h["Authorization"] = "Bearer " + token
    req = urllib.request.Request(base + path, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read()
            status, hdrs = resp.status, resp.headers
    except urllib.error.HTTPError as e:
        text, status, hdrs = e.read(), e.code, e.headers
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = text
    return status, parsed, hdrs


def wait_operation(base, op_id, token=None, timeout=300):
    deadline = time.time() + timeout
    while True:
        status, op, _ = call(base, "api/operation?id=" + op_id, token=token)
        if status != 200:
            raise RuntimeError(f"operation {op_id}: HTTP {status} {op}")
        if op["state"] != "running":
            return op
        if time.time() > deadline:
            raise RuntimeError(f"operation {op_id} still running after {timeout}s: {op}")
        time.sleep(0.05)
