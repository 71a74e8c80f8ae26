#!/usr/bin/python3
"""dlqctl, its console and the worker example over TLS (`rediss://`), run by ctest (issue 29:
every store command accepts the URLs dlq::redis::parse_url accepts, not only `dlqctl doctor`).

    test_dlqctl_tls.py --dlqctl PATH [--worker PATH]

Server: the `redis_tls` fixture (tests/support/redis_tls_server.sh); its ports and the test CA
are in the file $DLQ_TEST_REDIS_TLS_ENV_FILE names. The URL is
rediss://localhost:TLS_PORT/5?ca_file=CERTS/ca.crt (the certificate verified, docs/redis.md
"TLS"); what dlqctl did is checked through the same server's plain port (python3-redis).
Checks: send, count, queues, peek, replay (byte-exact into the source list), DLQ_STORE as
well as --store, `dlqctl serve --store rediss://…` answering /api/queues, the worker example
producing over rediss://, and the "not a store URL" hint naming rediss://.
Fails loudly: any failed check exits 1 with what was expected and what came back.
"""
import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import urllib.request

FAILURES = []
DB = 5  # a database of its own on the shared TLS server


def check(cond, what, detail=""):
    if not cond:
        FAILURES.append(what)
        print(f"    FAILED: {what} {detail}", flush=True)
    return cond


def run(cmd, env_extra=None, timeout=60):
    env = dict(os.environ)
    env.pop("DLQ_STORE", None)
    env.update(env_extra or {})
    p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def expect(result, what):
    rc, out, err = result
    check(rc == 0, what, f"(exit {rc}; stdout={out[:300]!r}; stderr={err[:500]!r})")
    return result


def read_env(path):
    out = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.strip().split("=", 1)
                out[k] = v
    return out


def test_commands(dlqctl, url, plain, q):
    print("- send, count, queues, peek, replay over rediss://", flush=True)
    payload = '{"order":7,"tls":true}'
    rc, out, err = expect(run([dlqctl, "--store", url, "send", q, "--error", "boom", "--payload",
                               payload]), "send --store rediss://")
    eid = out.strip()
    check(plain.llen("dlq:{%s}" % q) == 1, "the dead letter is in Redis",
          plain.keys("*%s*" % q))
    rc, out, err = expect(run([dlqctl, "count", q], {"DLQ_STORE": url}), "count (DLQ_STORE)")
    check(out == "1\n", "count prints 1", repr(out))
    rc, out, err = expect(run([dlqctl, "--store", url, "queues"]), "queues")
    check(q in out, "queues lists the queue", repr(out))
    rc, out, err = expect(run([dlqctl, "--store", url, "peek", q, "--json"]), "peek --json")
    entries = [json.loads(l) for l in out.splitlines() if l.strip()]
    check([e.get("id") for e in entries] == [eid], "peek --json gives the entry sent", out)
    rc, out, err = expect(run([dlqctl, "--store", url, "replay", q, "--all"]), "replay --all")
    check(out.splitlines()[-1:] == ["1"], "replay prints 1", repr(out))
    src = plain.lrange("queue:{%s}" % q, 0, -1)
    check(src == [payload.encode()], "the exact payload is in the source list", src)


def test_serve(dlqctl, url, q):
    print("- dlqctl serve --store rediss://…: /api/queues", flush=True)
    if run([dlqctl, "serve", "--help"])[0] != 0:
        print("    (this dlqctl has no serve: built without dlq::http)")
        return
    expect(run([dlqctl, "--store", url, "send", q, "--error", "e", "--payload", "{}"]), "send")
    env = dict(os.environ)
    env.pop("DLQ_STORE", None)
    proc = subprocess.Popen([dlqctl, "--store", url, "serve", "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        ready = select.select([proc.stdout], [], [], 20)[0]
        line = proc.stdout.readline().decode(errors="replace") if ready else ""
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+/)", line)
        if check(m, "serve starts on a rediss:// store", repr(line)):
            with urllib.request.urlopen(m.group(1) + "api/queues", timeout=30) as resp:
                body = json.loads(resp.read())
            names = [x.get("name") for x in body.get("queues", [])]
            check(q in names, "/api/queues lists the queue", body)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    check(proc.returncode == 0, "serve stops cleanly", (proc.returncode, err[-500:]))


def test_worker(worker, url, plain, q):
    print("- the worker example (05-worker) over rediss://", flush=True)
    rc, out, err = expect(run([worker, "--store", url, "--queue", q, "--produce", "3"]),
                          "05-worker --produce 3")
    check(plain.llen("queue:{%s}" % q) == 3, "3 jobs in the source list",
          plain.llen("queue:{%s}" % q))


def test_hint(dlqctl):
    print("- an unknown scheme: the hint names rediss://", flush=True)
    rc, out, err = run([dlqctl, "--store", "nosuch://host/0", "count", "q"])
    check(rc != 0 and "rediss://" in err, "the accepted forms include rediss://", repr(err))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dlqctl", required=True)
    p.add_argument("--worker")
    args = p.parse_args()
    env = read_env(os.environ["DLQ_TEST_REDIS_TLS_ENV_FILE"])
    url = f"rediss://localhost:{env['TLS_PORT']}/{DB}?ca_file={env['CERTS']}/ca.crt"
    import redis  # python3-redis
    plain = redis.Redis(host="127.0.0.1", port=int(env["PLAIN_PORT"]), db=DB)
    prefix = f"tls{os.getpid()}"
    try:
        test_commands(args.dlqctl, url, plain, prefix + "-cmd")
        test_serve(args.dlqctl, url, prefix + "-serve")
        if args.worker:
            test_worker(args.worker, url, plain, prefix + "-worker")
        test_hint(args.dlqctl)
    finally:
        for key in plain.scan_iter(match="*%s*" % prefix, count=1000):
            plain.delete(key)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", flush=True)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
