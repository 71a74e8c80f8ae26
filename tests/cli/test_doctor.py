#!/usr/bin/python3
"""End-to-end tests of `dlqctl doctor URL` against real servers (run by ctest).

    test_doctor.py --dlqctl PATH

Servers: the `redis_doctor` fixture (tests/support/redis_doctor_servers.sh; their URLs in the
file $DLQ_TEST_REDIS_DOCTOR_ENV_FILE names) and the `redis_cluster` fixture (its URL in
$DLQ_TEST_REDIS_CLUSTER_URL_FILE). Each server is configured in one wrong way (or none) and
the doctor must say so: allkeys-lru is an ERROR (exit 4), no persistence a WARN (exit 0, 4
with --strict), a healthy server all OK (exit 0) with its queues and their lengths, a CONFIG
renamed away "unknown (CONFIG not allowed)" and no crash, a cluster cluster_state ok, an
unreachable server exit 2. --json must parse and carry the same findings as the text.
Fails loudly: any failed check exits 1 with what was expected and what came back.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ARGS = None
FAILURES = []
LINE = re.compile(r"^(OK|WARN|ERROR) ([a-z-]+): (.*?)(?: — (.*))?$")


def run(*args, timeout=60):
    """Runs dlqctl with `args`; returns (exit code, stdout text, stderr text)."""
    env = dict(os.environ)
    env.pop("DLQ_STORE", None)
    p = subprocess.run([ARGS.dlqctl, *args], capture_output=True, timeout=timeout, env=env)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def check(cond, what, detail=""):
    if not cond:
        FAILURES.append(what)
        print(f"    FAILED: {what} {detail}", flush=True)
    return cond


def findings(out):
    """The (level, check, finding, fix) of every line of the text report; None when a line
    does not have the documented shape."""
    rows = []
    for line in out.splitlines():
        m = LINE.match(line)
        if not check(m is not None, "every line is LEVEL check: finding — fix", repr(line)):
            return None
        rows.append(m.groups())
    return rows


def doctor(url, *extra, code=None, what=""):
    rc, out, err = run("doctor", url, *extra)
    if "--json" not in extra:
        print("".join(f"    | {l}\n" for l in out.splitlines()), end="", flush=True)
    if code is not None:
        check(rc == code, f"{what}: exit {code}", f"(exit {rc}; stdout={out!r}; stderr={err!r})")
    return rc, out, err


def parse_json(text, what):
    try:
        return json.loads(text)
    except ValueError as e:
        check(False, f"{what}: --json parses", f"{e}: {text!r}")
        return None


def has(rows, level, name, text=""):
    return any(r[0] == level and r[1] == name and text in r[2] for r in rows or [])


def send(url, queue, n):
    for i in range(n):
        rc, out, err = run("--store", url, "send", queue, "--error", "boom", "--payload", f"p{i}")
        check(rc == 0, f"dlqctl send {queue}", f"(exit {rc}; stderr={err!r})")


def test_healthy(urls):
    print("- a healthy server: every check OK, exit 0, its queues and lengths", flush=True)
    url = urls["HEALTHY_URL"]
    send(url, "orders", 3)
    send(url, "payments", 1)
    rc, out, err = doctor(url, code=0, what="healthy server")
    rows = findings(out)
    check(rows is not None and len(rows) >= 7, "at least 7 findings", repr(out))
    check(all(r[0] == "OK" for r in rows or []), "every finding OK on a healthy server", out)
    for name in ("tls", "role", "maxmemory-policy", "persistence", "memory", "queues", "lua"):
        check(any(r[1] == name for r in rows or []), f"a '{name}' finding", out)
    check(has(rows, "OK", "queues", "orders (3)") and has(rows, "OK", "queues", "payments (1)"),
          "the queues with their lengths", out)
    check(has(rows, "OK", "maxmemory-policy", "noeviction"), "noeviction named", out)
    rc, jout, err = doctor(url, "--json", code=0, what="healthy server --json")
    doc = parse_json(jout, "healthy server")
    if doc is None:
        return
    same = sorted((f["level"], f["check"]) for f in doc.get("findings", []))
    check(same == sorted((r[0], r[1]) for r in rows or []), "--json carries the same findings",
          f"{same} vs {rows}")
    check(all(set(f) >= {"level", "check", "finding", "fix"} for f in doc.get("findings", [])),
          "every JSON finding has level, check, finding and fix", jout)
    queues = {q["queue"]: q["length"] for q in doc.get("queues", [])}
    check(queues.get("orders") == 3 and queues.get("payments") == 1, "--json queues", jout)
    check(doc.get("exit_code") == 0, "--json exit_code 0", jout)


def test_evicting(urls):
    print("- maxmemory-policy allkeys-lru: ERROR, exit 4", flush=True)
    rc, out, err = doctor(urls["EVICTING_URL"], code=4, what="allkeys-lru")
    rows = findings(out)
    check(has(rows, "ERROR", "maxmemory-policy", "allkeys-lru"), "ERROR maxmemory-policy", out)
    rc, jout, err = doctor(urls["EVICTING_URL"], "--json", code=4, what="allkeys-lru --json")
    doc = parse_json(jout, "allkeys-lru") or {"findings": []}
    check(any(f["level"] == "ERROR" and f["check"] == "maxmemory-policy"
              for f in doc["findings"]), "--json: ERROR maxmemory-policy", jout)


def test_no_persistence(urls):
    print("- save \"\" and appendonly no: WARN, exit 0 (4 with --strict)", flush=True)
    rc, out, err = doctor(urls["NO_PERSIST_URL"], code=0, what="no persistence")
    rows = findings(out)
    check(has(rows, "WARN", "persistence"), "WARN persistence", out)
    check(not any(r[0] == "ERROR" for r in rows or []), "no ERROR", out)
    doctor(urls["NO_PERSIST_URL"], "--strict", code=4, what="no persistence --strict")
    print("- the Python seed's layout: --dlq-key 'dlq:*', its corrupt list left out", flush=True)
    import redis  # python3-redis
    r = redis.Redis.from_url(urls["NO_PERSIST_URL"])
    r.rpush("dlq:refunds", "a", "b")
    r.rpush("dlq:refunds:corrupt", "junk")
    r.set("dlq:not-a-list", "x")
    rc, out, err = doctor(urls["NO_PERSIST_URL"], "--dlq-key", "dlq:*", code=0, what="seed layout")
    rows = findings(out)
    check(has(rows, "OK", "queues", "1 queue (dlq:*): refunds (2)"), "only refunds (2)", out)


def test_no_config(urls):
    print("- CONFIG renamed away: unknown (CONFIG not allowed), no crash", flush=True)
    rc, out, err = doctor(urls["NO_CONFIG_URL"], what="CONFIG refused")
    check(rc in (0, 4), "CONFIG refused: a report, not a failure", f"(exit {rc}; {err!r})")
    check(err == "", "nothing on stderr", repr(err))
    rows = findings(out)
    check(any("unknown (CONFIG not allowed)" in r[2] for r in rows or []),
          "unknown (CONFIG not allowed) reported", out)
    check(has(rows, "OK", "maxmemory-policy", "noeviction"),
          "the policy still read (from INFO memory)", out)


def test_acl_denials(urls):
    print("- an ACL user denied EVAL and SCAN: both ERROR (NOPERM), exit 4", flush=True)
    url = urls["NO_CONFIG_URL"].replace("redis://", "redis://limited:limited@")
    rc, out, err = doctor(url, code=4, what="ACL denials")
    rows = findings(out)
    check(has(rows, "ERROR", "lua", "EVAL refused: NOPERM"), "ERROR lua: NOPERM", out)
    check(has(rows, "ERROR", "queues", "SCAN refused: NOPERM"), "ERROR queues: SCAN refused", out)
    check("limited@" not in out and ":limited" not in out, "no password in the report", out)


def test_cluster(url):
    print("- a Redis Cluster: cluster_state ok", flush=True)
    rc, out, err = doctor(url, what="cluster")
    check(rc in (0, 4), "cluster: a report", f"(exit {rc}; {err!r})")
    rows = findings(out)
    check(has(rows, "OK", "cluster", "cluster_state ok"), "OK cluster: cluster_state ok", out)
    check(has(rows, "OK", "cluster", "16384"), "slots assigned named", out)


def test_tls(env_file):
    print("- TLS: the server certificate's subject, issuer and days left", flush=True)
    env = read_env(env_file)
    certs = env["CERTS"]
    url = f"rediss://localhost:{env['TLS_PORT']}/0?ca_file={certs}/ca.crt"
    rc, out, err = doctor(url, what="TLS")
    check(rc == 0, "TLS: warnings only, exit 0", f"(exit {rc}; {err!r})")
    rows = findings(out)
    # redis_tls_server.sh signs server.crt for one day: less than 30 days left is a WARN
    check(has(rows, "WARN", "tls", "TLS on, certificate verified; subject CN=localhost, "
                                   "issuer CN=dlq test CA, expires in 0 days"),
          "WARN tls with subject, issuer and days left", out)
    expired = f"rediss://localhost:{env['EXPIRED_PORT']}/0?insecure_skip_verify=true"
    rc, out, err = doctor(expired, code=4, what="TLS, expired certificate")
    rows = findings(out)
    check(has(rows, "ERROR", "tls", "expired 1 day ago"), "ERROR tls: expired 1 day ago", out)
    check(has(rows, "ERROR", "tls", "verification OFF"), "verification off said", out)


def test_unreachable():
    print("- an unreachable server: exit 2, one line on stderr", flush=True)
    rc, out, err = run("doctor", "redis://127.0.0.1:1/0", "--timeout", "1s")
    check(rc == 2, "unreachable: exit 2", f"(exit {rc}; {out!r}; {err!r})")
    check(err.startswith("dlqctl doctor: ") and err.count("\n") == 1, "one error line", repr(err))


def read_env(path):
    out = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.strip().split("=", 1)
                out[k] = v
    return out


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--dlqctl", required=True)
    ARGS = p.parse_args()
    urls = read_env(os.environ["DLQ_TEST_REDIS_DOCTOR_ENV_FILE"])
    with open(os.environ["DLQ_TEST_REDIS_CLUSTER_URL_FILE"]) as f:
        cluster_url = f.read().strip()
    test_healthy(urls)
    test_evicting(urls)
    test_no_persistence(urls)
    test_no_config(urls)
    test_acl_denials(urls)
    test_cluster(cluster_url)
    if os.environ.get("DLQ_TEST_REDIS_TLS_ENV_FILE"):  # a build with TLS and DLQ_TLS_TESTS
        test_tls(os.environ["DLQ_TEST_REDIS_TLS_ENV_FILE"])
    test_unreachable()
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", flush=True)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
