#!/usr/bin/python3
"""End-to-end tests of the dlqctl binary on a real store (run by ctest).

    test_dlqctl.py --dlqctl PATH --store sqlite          a fresh SQLite file in a temp dir
    test_dlqctl.py --dlqctl PATH --store redis           the test Redis: its URL is in the file
                                                         named by $DLQ_TEST_REDIS_URL_FILE
    test_dlqctl.py --dlqctl PATH --store postgres        a fresh database on the test PostgreSQL
                                                         ($DLQ_TEST_POSTGRES_URL_FILE), made with
                                                         `dlqctl migrate`; read back with psql

Every command, --json output parsed back, exit codes (bad usage 1, unreachable store 2,
missing id 3), byte-exact replay into the real source queue, corrupt data, a replay stopped by
SIGINT (count before = replayed + left), a hard stop (second SIGINT) losing nothing, and the
progress bar on a terminal. Uses only the standard library and python3-redis (Debian).
Fails loudly: any failed check exits 1 with what was expected and what came back.
"""
import argparse
import json
import os
import pty
import re
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

ARGS = None
STORE = None
FAILURES = []


def run(*args, stdin=b"", timeout=60):
    """Runs dlqctl with `args` (stdin: these bytes); returns (exit code, stdout, stderr text)."""
    p = subprocess.run([ARGS.dlqctl, *args], input=stdin, capture_output=True, timeout=timeout,
                       env=dict(os.environ, DLQ_STORE=STORE))
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def out_lines(stdout):
    return stdout.decode().splitlines()


def check(cond, what, detail=""):
    if not cond:
        FAILURES.append(what)
        print(f"    FAILED: {what} {detail}", flush=True)
    return cond


def expect(result, code, what):
    rc, out, err = result
    check(rc == code, what, f"(exit {rc}, expected {code}; stdout={out[:300]!r}; stderr={err[:500]!r})")
    return result


def one_line(err):
    return err.endswith("\n") and err.count("\n") == 1


class Backend:
    """Direct access to the store, to check what dlqctl did and to plant corrupt data."""

    def __init__(self, kind, url, where):
        self.kind, self.url, self.where = kind, url, where
        if kind == "redis":
            import redis  # python3-redis
            self.r = redis.Redis.from_url(url)

    def psql(self, sql):
        """Runs `sql` on the PostgreSQL store with psql; its rows (unaligned, tuples only)."""
        p = subprocess.run(["psql", self.url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           capture_output=True, timeout=60)
        if p.returncode != 0:
            raise RuntimeError("psql: " + p.stderr.decode(errors="replace"))
        return p.stdout.decode().splitlines()

    def source(self, queue):
        """Payloads waiting in the source queue, oldest first (bytes)."""
        if self.kind == "redis":
            return self.r.lrange("queue:{%s}" % queue, 0, -1)
        if self.kind == "postgres":  # the kv::JobQueue in the same database (schema dlq)
            rows = self.psql("SELECT encode(value, 'hex') FROM dlq.dlq_records WHERE collection = "
                             "'\\x%s'::bytea ORDER BY version" % ("jobs:{%s}:ready" % queue).encode().hex())
            return [bytes.fromhex(r) for r in rows]
        with sqlite3.connect(self.where) as db:
            rows = db.execute("SELECT value FROM dlq_records WHERE collection = ? ORDER BY version",
                              ("jobs:{%s}:ready" % queue,)).fetchall()
        return [bytes(r[0]) for r in rows]

    def plant_corrupt(self, queue, raw):
        if self.kind == "redis":
            self.r.rpush("dlq:{%s}" % queue, raw)
            return
        if self.kind == "postgres":
            self.psql("INSERT INTO dlq.dlq_records (collection, id, value) VALUES "
                      "('\\x%s'::bytea, '\\x%s'::bytea, '\\x%s'::bytea)"
                      % (("dlq:{%s}:dead" % queue).encode().hex(),
                         ("planted-%d" % time.monotonic_ns()).encode().hex(), raw.hex()))
            return
        with sqlite3.connect(self.where, timeout=30) as db:
            db.execute("INSERT INTO dlq_records (collection, id, value) VALUES (?, ?, ?)",
                       ("dlq:{%s}:dead" % queue, "planted-%d" % time.monotonic_ns(), raw))

    def cleanup(self, prefix):
        if self.kind == "redis":
            for key in self.r.scan_iter(match="*%s*" % prefix, count=1000):
                self.r.delete(key)


def test_send_count_peek_show(b, q):
    rc, out, err = expect(run("send", q, "--error", "payment timeout", "--attempt", "3", "--worker",
                              "w-7", "--payload", '{"order":42,"big":12345678901234567890}'),
                          0, "send --payload")
    id1 = out.decode().strip()
    check(len(id1) > 0, "send prints the new id")
    binary = b"\x00\x01binary\xff\npayload"
    p = subprocess.run([ARGS.dlqctl, "send", q, "--error", "not json"], input=binary,
                       capture_output=True, env=dict(os.environ, DLQ_STORE=STORE))
    check(p.returncode == 0, "send reads any bytes from stdin", p.stderr)
    id2 = p.stdout.decode().strip()
    expect(run("count", q), 0, "count")
    check(run("count", q)[1] == b"2\n", "count prints 2")

    rc, out, err = expect(run("peek", q, "--json"), 0, "peek --json")
    entries = [json.loads(l) for l in out_lines(out)]
    check(len(entries) == 2, "peek --json gives one line per entry", out)
    check(entries[0]["id"] == id1 and entries[1]["id"] == id2, "peek --json ids in order")
    check(entries[0]["original_payload"] == {"order": 42, "big": 12345678901234567890},
          "peek --json keeps the payload (big integers too)", entries[0])
    check(b'"big":12345678901234567890' in out, "the payload's bytes are verbatim in --json")
    for k in ("queue", "error", "attempt", "worker", "dead_lettered_at"):
        check(k in entries[0], f"peek --json has the seed field {k}")
    check(entries[0]["attempt"] == 3 and entries[0]["worker"] == "w-7", "fields as sent")
    check(entries[1].get("payload_encoding") == "base64", "a binary payload is stored as base64")

    rc, out, err = expect(run("peek", q), 0, "peek (table)")
    check(b"payment timeout" in out and b"ERROR" in out, "the table shows the error", out)

    rc, out, err = expect(run("show", q, id1, "--json"), 0, "show --json")
    check(json.loads(out) == entries[0], "show --json equals the peek --json line")
    rc, out, err = expect(run("show", q, id2), 0, "show (text)")
    check(b"\\x00\\x01binary\\xff\\npayload" in out, "show escapes a binary payload", out)

    rc, out, err = expect(run("show", q, "no-such-id"), 3, "show of a missing id exits 3")
    check(one_line(err) and "no-such-id" in err, "one clear line names the missing id", err)

    # Byte-exact replay into the real source queue.
    rc, out, err = expect(run("replay", q, "--all"), 0, "replay --all")
    check(out_lines(out)[-1] == "2", "replay prints the number replayed last", out)
    src = b.source(q)
    check(src == [b'{"order":42,"big":12345678901234567890}', binary],
          "replay pushed the exact payload bytes to the source queue", src)
    check(run("count", q)[1] == b"0\n", "nothing left after replay --all")


def test_replay_selection(b, q):
    payloads = "\n".join('{"n":%d}' % i for i in range(20)).encode()
    p = subprocess.run([ARGS.dlqctl, "send", q, "--error", "gateway timeout", "--lines"],
                       input=payloads, capture_output=True, env=dict(os.environ, DLQ_STORE=STORE))
    ids = p.stdout.decode().split()
    check(p.returncode == 0 and len(ids) == 20, "send --lines prints one id per line", p.stderr)
    expect(run("send", q, "--error", "bad currency", "--payload", '{"n":"c"}'), 0, "send")

    rc, out, err = expect(run("replay", q, "--all", "--dry-run"), 0, "replay --dry-run")
    check(out_lines(out)[-1] == "21" and "would replay 21" in err, "dry run counts", err)
    check(run("count", q)[1] == b"21\n", "dry run moves nothing")

    rc, out, err = expect(run("replay", q, "--id", ids[5], ids[2]), 0, "replay --id")
    check(out_lines(out)[-1] == "2", "replay --id replays those", out)
    check(b.source(q) == [b'{"n":2}', b'{"n":5}'], "in list order", b.source(q))

    rc, out, err = expect(run("replay", q, "--id", ids[5]), 3, "replay --id of a replayed id exits 3")
    check(out_lines(out)[-1] == "0", "and prints 0")

    rc, out, err = expect(run("replay", q, "--count", "3", "--to", q + "-retry"), 0, "replay --to")
    check(b.source(q + "-retry") == [b'{"n":0}', b'{"n":1}', b'{"n":3}'], "--to another queue")

    rc, out, err = expect(run("replay", q, "--all", "--error-contains", "currency"), 0, "filter")
    check(out_lines(out)[-1] == "1", "--error-contains selects", out)
    check(run("count", q)[1] == b"15\n", "the others stay")

    rc, out, err = expect(run("replay", q, "--all", "--older-than", "1h"), 0, "--older-than")
    check(out_lines(out)[-1] == "0", "nothing is an hour old", out)

    rc, out, err = expect(run("errors", q, "--json"), 0, "errors --json")
    groups = [json.loads(l) for l in out_lines(out)]
    check(groups and groups[0]["error"] == "gateway timeout" and groups[0]["count"] == 15,
          "errors groups by error", groups)

    rc, out, err = expect(run("stats", q, "--json"), 0, "stats --json")
    st = [json.loads(l) for l in out_lines(out)]
    check(len(st) == 1 and st[0]["dead"] == 15 and st[0]["corrupt"] == 0
          and st[0]["oldest_age_seconds"] is not None and st[0]["oldest_age_seconds"] >= 0
          and not st[0]["oldest_untimed"], "stats: depth and age of the oldest", st)
    rc, out, err = expect(run("metrics", q), 0, "metrics")
    check(f'dlq_entries{{queue="{q}",list="dead"}} 15\n' in out.decode()
          and "# TYPE dlq_oldest_entry_age_seconds gauge" in out.decode(),
          "metrics: the stats in the Prometheus text format", out)

    rc, out, err = expect(run("delete", q, ids[6], ids[7]), 0, "delete")
    check(out == b"2\n", "delete prints the number deleted", out)
    rc, out, err = expect(run("delete", q, ids[6]), 3, "delete of a missing id exits 3")
    check(one_line(err), "one line", err)

    rc, out, err = expect(run("trim", q, "--max-length", "12", "--yes"), 0, "trim --max-length")
    check(out == b"1\n" and run("count", q)[1] == b"12\n", "trim keeps the newest N", out)
    rc, out, err = expect(run("trim", q, "--max-age", "1h", "--yes"), 0, "trim --max-age")
    check(out == b"0\n", "nothing is an hour old", out)
    rc, out, err = expect(run("peek", q, "--count", "1", "--json"), 0, "peek after trim")
    check(json.loads(out)["id"] == ids[8], "trim removed the oldest", out)

    expect(run("purge", q), 1, "purge without --yes exits 1")
    check(run("count", q)[1] == b"12\n", "purge without --yes deletes nothing")
    rc, out, err = expect(run("purge", q, "--yes"), 0, "purge --yes")
    check(out == b"12\n", "purge prints the number removed", out)


def test_corrupt_and_queues(b, q):
    expect(run("send", q, "--error", "e", "--payload", "{}"), 0, "send")
    b.plant_corrupt(q, b"\xffnot json at all")
    b.plant_corrupt(q, b'{"queue":"x","error":"no payload"}')
    rc, out, err = expect(run("peek", q, "--json"), 0, "peek with corrupt entries")
    lines = [json.loads(l) for l in out_lines(out)]
    check(len(lines) == 3 and lines[1]["problem"] == "not valid JSON", "corrupt entries reported", lines)

    rc, out, err = expect(run("replay", q, "--all"), 0, "replay with corrupt entries")
    check(out_lines(out)[-1] == "1" and "set aside 2 unreadable" in err, "set aside", err)
    check(run("count", q, "--corrupt")[1] == b"2\n", "2 in the corrupt list")
    rc, out, err = expect(run("corrupt", q, "--json"), 0, "corrupt --json")
    items = [json.loads(l) for l in out_lines(out)]
    check(len(items) == 2 and items[0].get("raw_base64") and "problem" in items[1],
          "corrupt --json shows the raw bytes and the problem", items)

    rc, out, err = expect(run("queues", "--json"), 0, "queues --json")
    mine = [json.loads(l) for l in out_lines(out) if json.loads(l)["queue"] == q]
    check(mine == [{"queue": q, "dead": 0, "corrupt": 2, "waiting": 1}], "queues --json depths", mine)
    rc, out, err = expect(run("queues"), 0, "queues (table)")
    check(q.encode() in out and b"WAITING" in out, "queues table", out)
    if b.kind == "redis":  # a key of the wrong type under the layout: listed with the reason
        b.r.rpush("dlq:{%s-bad}" % q, b"{}")
        b.r.set("dlq:{%s-bad}:corrupt" % q, b"a string, not a list")
        rc, out, err = expect(run("queues", "--json"), 0, "queues with an unreadable queue")
        rows = {json.loads(l)["queue"]: json.loads(l) for l in out_lines(out)}
        check("WRONGTYPE" in rows.get(q + "-bad", {}).get("error", ""), "the reason is given", rows)
        check(rows.get(q, {}).get("corrupt") == 2, "the other queues are listed", rows)
        check("could not be read" in err, "and a warning", err)
    expect(run("recover", q), 0, "recover")
    rc, out, err = expect(run("purge", q, "--corrupt", "--yes"), 0, "purge --corrupt")
    check(out == b"2\n", "purge --corrupt prints 2", out)


def seed(q, n):
    payloads = "\n".join('{"n":%d}' % i for i in range(n)).encode()
    p = subprocess.run([ARGS.dlqctl, "send", q, "--error", "e", "--lines"], input=payloads,
                       capture_output=True, env=dict(os.environ, DLQ_STORE=STORE), timeout=120)
    check(p.returncode == 0, "seeding with send --lines", p.stderr)


def wait_until_started(b, q, limit=20.0):
    """Waits until the replay has moved something (bounded)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if len(b.source(q)) > 0:
            return True
        time.sleep(0.05)
    return False


def test_sigint(b, q):
    n = 3000
    seed(q, n)
    proc = subprocess.Popen([ARGS.dlqctl, "replay", q, "--all", "--rate", "1000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, DLQ_STORE=STORE))
    check(wait_until_started(b, q), "the paced replay started")
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    err = err.decode(errors="replace")
    check(proc.returncode == 130, "Ctrl-C: exit 130", f"(exit {proc.returncode}; {err!r})")
    replayed = int(out.decode().splitlines()[-1])
    left = int(run("count", q)[1])
    moved = len(b.source(q))
    check(0 < replayed < n, "stopped part-way", replayed)
    check(replayed + left == n, "count before = replayed + left", (replayed, left))
    check(moved == replayed, "every replayed entry is in the source queue", (moved, replayed))
    check("interrupted" in err and "nothing was lost" in err, "says it stopped cleanly", err)

    # Go on, then stop hard: the second Ctrl-C ends dlqctl at once. Nothing is lost.
    proc = subprocess.Popen([ARGS.dlqctl, "replay", q, "--all", "--rate", "1000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, DLQ_STORE=STORE))
    deadline = time.monotonic() + 20
    while len(b.source(q)) == moved and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    check(proc.returncode in (-signal.SIGINT, 130), "a second Ctrl-C ends it", proc.returncode)
    expect(run("recover", q), 0, "recover after a hard stop")
    left = int(run("count", q)[1])
    source = b.source(q)
    distinct = {json.loads(x)["n"] for x in source}
    if b.kind in ("redis", "postgres"):  # every batch moves atomically: exactly once
        # (PostgreSQL: the JobQueue in the same database, one transaction per step)
        check(left + len(source) == n, "hard stop: every entry in exactly one place", (left, len(source)))
    else:  # push first, then remove: at-least-once, never lost
        check(left + len(distinct) >= n, "hard stop: nothing lost", (left, len(distinct)))
    rc, out, err = expect(run("replay", q, "--all"), 0, "replay the rest")
    distinct = {json.loads(x)["n"] for x in b.source(q)}
    check(distinct == set(range(n)), "in the end every entry was replayed", len(distinct))
    check(run("count", q)[1] == b"0\n", "and none is left")


def test_progress_bar(b, q):
    seed(q, 2000)
    master, slave = pty.openpty()
    proc = subprocess.Popen([ARGS.dlqctl, "replay", q, "--all", "--rate", "2000"],
                            stdout=subprocess.PIPE, stderr=slave,
                            env=dict(os.environ, DLQ_STORE=STORE))
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out, _ = proc.communicate(timeout=60)
    os.close(master)
    check(proc.returncode == 0, "replay on a terminal", proc.returncode)
    check(b"\rreplay " + q.encode() + b" [" in seen, "a progress bar on stderr", seen[:300])
    check(b"%" in seen and b"/s" in seen, "with percent and rate", seen[:300])
    check(out.decode().splitlines()[-1] == "2000", "still prints the count last", out)
    rc, out, err = expect(run("replay", q, "--all"), 0, "no terminal")
    check("\r" not in err, "no progress bar when stderr is not a terminal", err)


def payload_files_holding(token):
    """Files named like the temporary payload files a transform once got (dlqctl-payload-*),
    in /tmp and $TMPDIR, that hold `token`."""
    found = []
    for d in {"/tmp", tempfile.gettempdir()}:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if not name.startswith("dlqctl-payload-"):
                continue
            try:
                with open(os.path.join(d, name), "rb") as f:
                    if token.encode() in f.read():
                        found.append(os.path.join(d, name))
            except OSError:
                pass
    return found


def group_gone(pg, limit=5.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            os.killpg(pg, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def test_edited_replay(b, q):
    """Issue 27 defect 1 on a real store: an empty edit is refused and moves nothing; a
    dlqctl stopped (SIGTERM, SIGINT) or killed (SIGKILL) while its transform runs leaves the
    entry in place and no file with the payload behind."""
    def fresh():
        """A new dead letter of its own: (id, payload, token)."""
        token = "tok-%d-%d" % (os.getpid(), time.monotonic_ns())
        payload = '{"amount":1,"token":"%s"}' % token
        rc, out, err = expect(run("send", q, "--error", "e", "--payload", payload), 0, "send")
        untouched.source = b.source(q)
        return out.decode().strip(), payload, token

    def untouched(eid, payload, what):
        rc, out, err = run("show", q, eid, "--json")
        check(rc == 0 and json.loads(out)["original_payload"] == json.loads(payload),
              what + ": the dead letter is still there with its payload", (rc, out[:300], err))
        check(b.source(q) == untouched.source, what + ": nothing went to the source queue",
              b.source(q))

    for args, stdin in [(("--transform-cmd", "jq -c '.amount |=' 2>/dev/null | cat"), b""),
                        (("--transform-cmd", "true"), b""), (("--transform-cmd", "echo"), b""),
                        (("--set-payload", "-"), b"")]:
        eid, payload, token = fresh()
        rc, out, err = expect(run("replay", q, "--id", eid, *args, stdin=stdin), 1,
                              "an empty edit is refused: %s" % (args,))
        # (the jq pipeline fails on its exit status first: transforms run with pipefail)
        check(("empty" in err or "failed (exit status" in err) and "nothing was replayed" in err,
              "and says so", err)
        untouched(eid, payload, "empty edit %s" % (args,))

    with tempfile.TemporaryDirectory() as d:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
            name = signal.Signals(sig).name
            eid, payload, token = fresh()
            ready, stdin_of = os.path.join(d, name + ".pg"), os.path.join(d, name + ".stdin")
            cmd = "readlink /proc/self/fd/0 > %s; echo $$ > %s; sleep 60; cat" % (stdin_of, ready)
            proc = subprocess.Popen([ARGS.dlqctl, "replay", q, "--id", eid, "--transform-cmd", cmd],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=dict(os.environ, DLQ_STORE=STORE))
            deadline = time.monotonic() + 20
            pg = 0
            while time.monotonic() < deadline and not pg:
                try:
                    with open(ready) as f:
                        pg = int(f.read().strip() or 0)
                except (OSError, ValueError):
                    time.sleep(0.02)
            if not check(pg > 0, name + ": the transform started"):
                proc.kill()
                proc.communicate()
                continue
            with open(stdin_of) as f:
                stdin_is = f.read().strip()
            check(stdin_is.startswith("pipe:"), name + ": the transform reads a pipe, not a file",
                  stdin_is)
            proc.send_signal(sig)
            try:  # (not communicate(): a transform that outlived dlqctl holds its stderr)
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                check(False, name + ": dlqctl ended")
                proc.kill()
                proc.wait()
            if sig == signal.SIGKILL:
                # A transform outlives a SIGKILLed dlqctl (nothing can stop it then); it can
                # no longer change anything: its output goes nowhere.
                check(proc.returncode == -signal.SIGKILL, name + ": killed", proc.returncode)
            else:
                check(group_gone(pg), name + ": the transform's process group was killed")
            try:
                os.killpg(pg, signal.SIGKILL)
            except ProcessLookupError:
                pass
            err = proc.stderr.read().decode(errors="replace")
            proc.stdout.close()
            proc.stderr.close()
            if sig != signal.SIGKILL:
                check(proc.returncode == 130, name + ": exit 130", (proc.returncode, err))
                check("interrupted" in err and "nothing was replayed" in err,
                      name + ": says what happened", err)
            check(payload_files_holding(token) == [], name + ": no file holds the payload",
                  payload_files_holding(token))
            untouched(eid, payload, name)

    eid, payload, token = fresh()
    rc, out, err = expect(run("replay", q, "--id", eid, "--transform-cmd",
                              "sed 's/\"amount\":1/\"amount\":2/'"),
                          0, "then an edit that works")
    check(b.source(q)[len(untouched.source):] == [b'{"amount":2,"token":"%s"}' % token.encode()],
          "replays the edited payload", b.source(q))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


SECRET = "SECa@SECb/SECc:SECd"  # '@', '/' and ':' in a password; every part starts with SEC
STORE_COMMANDS = [
    ("send", "{q}", "--error", "e", "--payload", "{{}}"), ("count", "{q}"), ("peek", "{q}"),
    ("show", "{q}", "some-id"), ("replay", "{q}", "--all"),
    ("replay", "{q}", "--id", "some-id", "--transform-cmd", "cat"), ("delete", "{q}", "some-id"),
    ("purge", "{q}", "--yes"), ("queues",), ("recover", "{q}"),
    ("trim", "{q}", "--max-length", "1", "--yes"), ("errors", "{q}"), ("stats",), ("metrics",),
    ("corrupt", "{q}"), ("search", "{q}"), ("discard", "{q}", "--error-contains", "x", "--yes"),
    ("audit", "{q}"),
]


def start_serve(store, *global_args, env=None):
    """`dlqctl [global_args] --store STORE serve` on a free port: (process, first stdout line)."""
    proc = subprocess.Popen([ARGS.dlqctl, *global_args, "--store", store, "serve", "--listen",
                             "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    ready = select.select([proc.stdout], [], [], 20)[0]
    line = proc.stdout.readline().decode(errors="replace") if ready else ""
    return proc, line


def stop_serve(proc):
    """Stops a `dlqctl serve` (SIGTERM); returns (exit code, stdout rest, stderr)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def test_secrets(b, q):
    """Issue 27 defect 7: no part of a password shows in the serve banner or in any command's
    store error, for passwords holding '@', '/', ':' (also %-escaped), as user:password, as a
    lone password and as ?password=. On a private redis-server: it gets a password."""
    if b.kind != "redis":
        return
    from urllib.parse import quote
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support",
                          "redis_server.sh")
    d = tempfile.mkdtemp(prefix="dlqctl-secrets-redis-")
    subprocess.run([script, "start", d], check=True, stdout=subprocess.DEVNULL)
    try:
        with open(os.path.join(d, "url")) as f:
            hostport = f.read().strip()[len("redis://"):].rsplit("/", 1)[0]
        import redis
        r = redis.Redis.from_url("redis://" + hostport + "/0")
        r.execute_command("ACL", "SETUSER", "alice", "on", ">" + SECRET, "~*", "&*", "+@all")
        r.config_set("requirepass", SECRET)

        def forms(password, where):
            return [f"redis://:{password}@{where}/0", f"redis://alice:{password}@{where}/0",
                    f"redis://:{quote(password, safe='')}@{where}/0",
                    f"redis://{password.replace(':', '')}@{where}/0",  # a lone password:
                    # (with a ':' it would be user:password, and a user name is printed)
                    f"redis://{where}/0?password={quote(password, safe='')}"]

        def clean(text, what):
            check("SEC" not in text, what + ": no part of the password", text[-600:])

        # (the lone-password form cannot carry this password: it has a ':')
        for url in [u for u in forms(SECRET, hostport) if not u.startswith("redis://SECa")]:
            rc, out, err = run("count", q, "--store", url)
            check(rc == 0, "the password works: " + url.replace(SECRET, "PW"), err)
            proc, line = start_serve(url)
            rc, out, err = stop_serve(proc)
            check("listening on http://127.0.0.1:" in line and "***" in line,
                  "serve starts and names its store masked", (line, err[-300:]))
            clean(line + out + err, "serve banner and log")
        port = free_port()  # nothing listens there
        for url in forms("SECa@SECb/SECc:SECx", hostport) + forms(SECRET, f"127.0.0.1:{port}"):
            shown = url.replace("SEC", "S.E.C")
            for cmd in STORE_COMMANDS:
                args = [a.format(q=q) for a in cmd]
                rc, out, err = run(*args, "--store", url, "--timeout", "2s")
                check(rc == 2, f"dlqctl {args[0]} on {shown}: the store fails (exit 2)", (rc, err))
                clean(out.decode(errors="replace") + err, f"dlqctl {args[0]} on {shown}")
            proc, line = start_serve(url, "--timeout", "2s")
            rc, out, err = stop_serve(proc)
            check(rc == 2, f"serve on {shown}: the store fails (exit 2)", (rc, err))
            clean(line + out + err, f"serve on {shown}")
            # a URL where no argument goes: the parser's complaint must not echo it
            for args in (("serve", url), ("count", q, url)):
                rc, out, err = run(*args)
                check(rc == 1, f"dlqctl {args[0]} with a stray {shown}: bad usage", (rc, err))
                clean(out.decode(errors="replace") + err, f"dlqctl {args[0]} with a stray {shown}")
    finally:
        subprocess.run([script, "stop", d], stdout=subprocess.DEVNULL)


def test_global_options(b, q):
    """Global options go before any command, serve included (issue 27: `dlqctl --actor alice
    serve` was "'serve' is not a command"), and after it; serve's audit actor is --actor,
    else the OS user, as for the other commands."""
    import urllib.request

    def last_actor():
        rc, out, err = expect(run("audit", q, "--json"), 0, "audit --json")
        records = [json.loads(l) for l in out_lines(out)]
        return records[-1]["actor"] if records else None

    def delete_through_console(args, env_extra=None, what=""):
        rc, out, err = expect(run("send", q, "--error", "e", "--payload", "{}"), 0, "send")
        eid = out.decode().strip()
        env = dict(os.environ, DLQ_STORE=STORE, **(env_extra or {}))
        proc = subprocess.Popen([ARGS.dlqctl, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        ready = select.select([proc.stdout], [], [], 20)[0]
        line = proc.stdout.readline().decode(errors="replace") if ready else ""
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+/)", line)
        if check(m, "dlqctl %s: serve starts" % " ".join(args), line):
            req = urllib.request.Request(m.group(1) + "api/delete",
                                         data=json.dumps({"queue": q, "ids": [eid]}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                body = json.loads(resp.read())
            check(body.get("deleted") == 1, what + ": the console deleted the entry", body)
        rc, out, err = stop_serve(proc)
        check(rc == 0, what + ": serve stops cleanly", (rc, err[-500:]))

    if run("serve", "--help")[0] == 0:
        delete_through_console(["--actor", "alice", "serve", "--listen", "127.0.0.1:0"],
                               what="--actor alice serve")
        check(last_actor() == "alice", "--actor before serve is the audit actor", last_actor())
        delete_through_console(["--timeout", "2s", "--actor=bob", "--store", STORE, "serve",
                                "--listen", "127.0.0.1:0"], what="--actor=bob serve")
        check(last_actor() == "bob", "--actor=bob before serve", last_actor())
        delete_through_console(["serve", "--listen", "127.0.0.1:0", "--actor", "carol",
                                "--store", STORE, "--timeout", "2s"], what="serve --actor carol")
        check(last_actor() == "carol", "--actor and --store after serve", last_actor())
        delete_through_console(["serve", "--listen", "127.0.0.1:0"], {"USER": "os-user-x"},
                               what="serve without --actor")
        check(last_actor() == "os-user-x", "serve's actor defaults to the OS user", last_actor())
    else:
        print("    (this dlqctl has no serve: built without dlq::http)")

    rc, out, err = expect(run("send", q, "--error", "e", "--payload", '{"n":1}'), 0, "send")
    eid = out.decode().strip()
    expect(run("--actor", "dave", "--timeout", "3s", "--store", STORE, "discard", q, "--id", eid,
               "--yes"), 0, "global options before discard")
    check(last_actor() == "dave", "--actor before discard", last_actor())
    expect(run("--timeout=3s", "--actor=erin", "count", q), 0, "=value forms before count")
    expect(run("--timeout", "3s", "queues", "--json"), 0, "--timeout before queues")
    expect(run("--store", STORE, "stats", q, "--json"), 0, "--store before stats")


def test_exit_codes(b, q):
    port = free_port()  # nothing listens there
    started = time.monotonic()
    p = subprocess.run([ARGS.dlqctl, "count", q, "--store", f"redis://user:secret@127.0.0.1:{port}/0",
                        "--timeout", "500ms"], capture_output=True, timeout=60)
    err = p.stderr.decode()
    check(p.returncode == 2, "an unreachable store exits 2", (p.returncode, err))
    check(one_line(err) and str(port) in err, "one line naming the endpoint", err)
    check("secret" not in err, "never the password", err)
    check(time.monotonic() - started < 10, "and fails fast")

    for args, what in [((), "no command"), (("frob",), "unknown command"),
                       (("count",), "missing queue"), (("peek", q, "--count", "x"), "bad number"),
                       (("replay", q), "replay without a selection"),
                       (("replay", q, "--all", "--older-than", "soon"), "bad duration"),
                       (("count", q, "--store", "ftp://x"), "unknown store scheme"),
                       (("count", q, "--store", "redis://127.0.0.1:99999999/0"), "bad port")]:
        rc, out, err = expect(run(*args), 1, f"bad usage exits 1: {what}")
        check(one_line(err), f"one line: {what}", err)
    for cmd in ("send", "count", "peek", "show", "replay", "delete", "purge", "queues", "recover",
                "trim", "errors", "corrupt"):
        rc, out, err = expect(run(cmd, "--help"), 0, f"{cmd} --help")
        check(f"dlqctl {cmd}".encode() in out, f"{cmd} --help shows its usage")

    if b.kind != "sqlite":
        return
    with tempfile.TemporaryDirectory() as d:
        missing = os.path.join(d, "nope.db")
        p = subprocess.run([ARGS.dlqctl, "count", q, "--store", "sqlite://" + missing],
                           capture_output=True, timeout=60)
        check(p.returncode == 2 and missing in p.stderr.decode() and one_line(p.stderr.decode()),
              "a missing SQLite file exits 2 naming it", p.stderr)
        check(not os.path.exists(missing), "and is not created by a read")
        junk = os.path.join(d, "junk.db")
        with open(junk, "wb") as f:
            f.write(b"this is not a database" * 100)
        p = subprocess.run([ARGS.dlqctl, "count", q, "--store", "sqlite://" + junk],
                           capture_output=True, timeout=60)
        check(p.returncode == 2 and junk in p.stderr.decode() and one_line(p.stderr.decode()),
              "a file that is not a database exits 2 naming it", p.stderr)


def test_where_things_are(b, q):
    """Issue 15: replay names its destination; an empty queue and another key layout are
    explained instead of a bare 0."""
    expect(run("send", q, "--error", "e", "--payload", '{"n":1}'), 0, "send")
    rc, out, err = expect(run("replay", q, "--all"), 0, "replay --all")
    if b.kind in ("sqlite", "postgres"):
        check("they went to the job queue jobs:{%s}:ready in %s" % (q, b.where) in err,
              "replay on SQLite/PostgreSQL names the kv::JobQueue list and the store", err)
    else:
        check("they went to the Redis list queue:{%s}" % q in err,
              "replay on Redis names the source list", err)
    rc, out, err = expect(run("replay", q, "--all", "--json"), 0, "replay --all --json (empty)")
    report = json.loads(out)
    check(report["replayed"] == 0 and report["queue"] == q, "replay --json is one object", out)
    check("no dead letters in '%s'" % q in err, "an empty queue says so", err)
    rc, out, err = expect(run("count", q + "-none", "--json"), 0, "count --json")
    check(json.loads(out) == {"queue": q + "-none", "dead": 0}, "count --json", out)
    check("queues that have some:" in err, "an empty queue names the queues that have some", err)
    if b.kind == "redis":
        # A database of its own, holding only the Python service's layout (dlq:<queue>).
        other_db = STORE.rsplit("/", 1)[0] + "/7"  # no other test uses DB 7 (console_support.redis_url)
        import redis
        r13 = redis.Redis.from_url(other_db)
        seed_key = "dlq:%s-py" % q
        r13.rpush(seed_key, json.dumps({"original_payload": {"a": 1}, "queue": q + "-py",
                                        "error": "x", "attempt": 1, "worker": "w",
                                        "dead_lettered_at": "2026-01-01T00:00:00"}))
        try:
            p = subprocess.run([ARGS.dlqctl, "queues", "--store", other_db], capture_output=True,
                               timeout=60)
            err = p.stderr.decode()
            check(p.returncode == 0 and "the Python service's layout dlq:*" in err
                  and "%s-py" % q in err and "--dlq-key 'dlq:*' --queue-key 'queue:*'" in err,
                  "queues names the seed layout and its flags", err)
            p = subprocess.run([ARGS.dlqctl, "queues", "--store", other_db, "--dlq-key", "dlq:*",
                                "--queue-key", "queue:*"], capture_output=True, timeout=60)
            check(("%s-py" % q).encode() in p.stdout and b"--dlq-key" not in p.stderr,
                  "with those flags the queue is listed", p.stdout + p.stderr)
        finally:
            r13.delete(seed_key)
    rc, out, err = expect(run("replay", "--help"), 0, "replay --help")
    check(b"jobs:{QUEUE}:ready" in out, "replay --help names the SQLite destination", out)


def postgres_server_url():
    url_file = os.environ.get("DLQ_TEST_POSTGRES_URL_FILE")
    if not url_file or not os.path.exists(url_file):
        print(f"FAIL: no test PostgreSQL: DLQ_TEST_POSTGRES_URL_FILE={url_file!r} does not name a "
              "file (ctest starts the server with the `postgres` fixture)", file=sys.stderr)
        return None
    return open(url_file).read().strip()


def test_migrate(b, q):
    """PostgreSQL (issue 32): no tables until `dlqctl migrate`; every command says to run
    exactly that command; migrate is idempotent and prints the schema version."""
    rc, out, err = expect(run("count", q), 2, "count before migrate: the store fails")
    check(one_line(err) and "no dlq tables" in err
          and f"run: dlqctl migrate --store '{b.where}' (the same --store" in err,
          "the schema error names the exact dlqctl migrate command", err)
    check("dlq::postgres::migrate" not in err, "not the C++ call", err)
    rc, out, err = expect(run("migrate"), 0, "migrate (first)")
    check(out == b"schema version 1 (was none)\n", "migrate prints the version it made", out)
    rc, out, err = expect(run("migrate", "--store", STORE), 0, "migrate (again)")
    check(out == b"schema version 1 (already current)\n", "migrate again changes nothing", out)
    check(b.psql("SELECT version FROM dlq.dlq_schema") == ["1"], "one version row",
          b.psql("SELECT version FROM dlq.dlq_schema"))
    rc, out, err = expect(run("migrate", "--store", "sqlite:///tmp/x.db"), 1,
                          "migrate of a SQLite store is bad usage")
    check(one_line(err) and "PostgreSQL" in err, "says migrate is for PostgreSQL", err)
    expect(run("count", q), 0, "count after migrate")
    # As on SQLite (main): a queue that has some, for test_where_things_are.
    expect(run("send", "init", "--error", "e", "--payload", "{}"), 0, "send after migrate")


def test_console(b, q):
    """search, discard --yes and audit read back; `dlqctl serve` on the store: /api/queues
    lists the queue, /metrics its depth."""
    import urllib.request
    for i in range(3):
        expect(run("send", q, "--error", "console", "--payload", '{"n":%d}' % i), 0, "send")
    rc, out, err = expect(run("search", q, "--payload-contains", '"n":1', "--json"), 0, "search")
    found = [json.loads(l) for l in out_lines(out)]
    check(len(found) == 1 and found[0].get("original_payload") == {"n": 1}, "search finds one", out)
    try:
        serve_and_read(q)
    finally:
        rc, out, err = expect(run("discard", q, "--error-contains", "console", "--yes"), 0, "discard")
        check(out_lines(out)[-1:] == ["3"], "discard --yes prints the number deleted", out)
    check(run("count", q)[1] == b"0\n", "discard deleted them")
    rc, out, err = expect(run("audit", q, "--json"), 0, "audit --json")
    ops = [json.loads(l).get("operation") for l in out_lines(out)]
    check(ops[-1:] == ["discard"], "the audit trail records the discard", ops)


def serve_and_read(q):
    import urllib.request
    if run("serve", "--help")[0] != 0:
        print("    (this dlqctl has no serve: built without dlq::http)")
        return
    proc, line = start_serve(STORE)
    try:
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+/)", line)
        if not check(m, "serve starts", line):
            return
        with urllib.request.urlopen(m.group(1) + "api/queues", timeout=30) as resp:
            body = json.loads(resp.read())
        mine = [r for r in body.get("queues", []) if r.get("name") == q]
        check(len(mine) == 1 and mine[0].get("dead") == 3, "/api/queues lists the queue", body)
        with urllib.request.urlopen(m.group(1) + "metrics", timeout=30) as resp:
            text = resp.read().decode()
        check(f'dlq_entries{{queue="{q}",list="dead"}} 3\n' in text, "/metrics has its depth",
              text[:2000])
    finally:
        rc, out, err = stop_serve(proc)
        check(rc == 0, "serve stops cleanly", (rc, err[-500:]))


def main():
    global ARGS, STORE
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    ap.add_argument("--store", choices=["sqlite", "redis", "postgres"], required=True)
    ARGS = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="dlqctl-e2e-")
    if ARGS.store == "redis":
        url_file = os.environ.get("DLQ_TEST_REDIS_URL_FILE")
        if not url_file or not os.path.exists(url_file):
            print(f"FAIL: no test Redis: DLQ_TEST_REDIS_URL_FILE={url_file!r} does not name a file "
                  "(ctest starts the server with the `redis` fixture)", file=sys.stderr)
            return 1
        STORE = open(url_file).read().strip()
        backend = Backend("redis", STORE, STORE)
    elif ARGS.store == "postgres":
        server = postgres_server_url()
        if server is None:
            return 1
        database = f"dlqctl_e2e_{os.getpid()}"  # fresh: no dlq tables until test_migrate
        Backend("postgres", server, server).psql(f"CREATE DATABASE {database}")
        STORE = server.rsplit("/", 1)[0] + "/" + database
        # where: the URL as dlqctl shows it (user and password masked)
        backend = Backend("postgres", STORE, re.sub(r"//[^@/]*@", "//***@", STORE))
    else:
        path = os.path.join(tmp.name, "e2e.db")
        STORE = "sqlite://" + path
        backend = Backend("sqlite", STORE, path)
        # The store is created by the first send; reads of a missing file are errors.
        subprocess.run([ARGS.dlqctl, "send", "init", "--error", "e", "--payload", "{}"],
                       check=True, capture_output=True, env=dict(os.environ, DLQ_STORE=STORE))
    prefix = f"e2e{os.getpid()}"
    tests = [test_migrate] if ARGS.store == "postgres" else []
    tests += [test_send_count_peek_show, test_replay_selection, test_corrupt_and_queues,
             test_sigint, test_progress_bar, test_exit_codes, test_where_things_are,
             test_edited_replay, test_secrets, test_global_options, test_console]
    try:
        for t in tests:
            print(f"--- {t.__name__} ({ARGS.store})", flush=True)
            before = len(FAILURES)
            t(backend, f"{prefix}-{t.__name__[5:]}")
            print("    ok" if len(FAILURES) == before else "    FAILED", flush=True)
    finally:
        backend.cleanup(prefix)
        tmp.cleanup()
        if ARGS.store == "postgres":
            Backend("postgres", server, server).psql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    if FAILURES:
        print(f"\n{len(FAILURES)} check(s) FAILED:", *FAILURES, sep="\n  ", file=sys.stderr)
        return 1
    print("\nall dlqctl end-to-end checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
