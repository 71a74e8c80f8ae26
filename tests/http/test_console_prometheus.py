#!/usr/bin/python3
"""A real Prometheus (Debian's `prometheus`) on loopback scrapes the console's /metrics; its
/api/v1/query answers dlq_entries equal to LLEN of the dead list, also after the list
changed; `promtool check metrics` accepts the exposition (hostile queue names included); and
with a token the scrape works through Prometheus's own bearer-token setting.

    test_console_prometheus.py --dlqctl PATH      (ctest: fixture `redis`)
"""
import argparse
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from console_support import (Serve, call, check, dead_key, envelope, fill, finish, redis_client,
                             redis_url)

DB = 14
TOKEN = "prometheus-token-0123456789abcdef"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def query(prom, expr):
    u = f"http://127.0.0.1:{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(u, timeout=10) as resp:
            data = json.loads(resp.read())
    except OSError:
        return None
    res = data.get("data", {}).get("result", [])
    return float(res[0]["value"][1]) if res else None


def wait_value(prom, expr, want, timeout=40):
    deadline = time.time() + timeout
    got = None
    while time.time() < deadline:
        got = query(prom, expr)
        if got == want:
            return got
        time.sleep(0.25)
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    url = redis_url(DB)
    r = redis_client(url)
    q = "console-prom"
    hostile = 'console-we"ird\\name'
    for k in (dead_key(q), dead_key(hostile)):
        r.delete(k)
    fill(r, q, 1234, lambda i: envelope(q, {"n": i}, "boom"))
    fill(r, hostile, 3, lambda i: envelope(hostile, {"n": i}, "boom"))

    with tempfile.TemporaryDirectory() as tmp:
        tok = os.path.join(tmp, "token")
        with open(tok, "w") as f:
            f.write(TOKEN + "\n")
        srv = Serve(args.dlqctl, url, "--token-file", tok, "--read-only")
        prom_proc = None
        try:
            status, text, _ = call(srv.url, "metrics", token=TOKEN)
            text = text.decode() if isinstance(text, bytes) else str(text)
            check(status == 200, "metrics served", f"{status}")
            p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
            check(p.returncode == 0, "promtool check metrics accepts the exposition", (p.stdout + p.stderr).decode()[:500])
            # a backslash of a queue name is doubled (the label is injective, docs/observability.md)
            check('dlq_entries{queue="console-we\\"ird\\\\\\\\name",list="dead"} 3' in text, "label escaping", text[:600])

            prom = free_port()
            cfg = os.path.join(tmp, "prometheus.yml")
            with open(cfg, "w") as f:
                f.write(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: dlq-console
    metrics_path: /metrics
    authorization:
      type: Bearer
      credentials_file: {tok}
    static_configs:
      - targets: ['127.0.0.1:{srv.port}']
""")
            prom_proc = subprocess.Popen(
                ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp}/data",
                 f"--web.listen-address=127.0.0.1:{prom}", "--log.level=warn"],
                stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "prom.log"), "w"))
            expr = f'dlq_entries{{queue="{q}",list="dead"}}'
            got = wait_value(prom, expr, float(r.llen(dead_key(q))), timeout=60)
            check(got == float(r.llen(dead_key(q))), "Prometheus: dlq_entries == LLEN", f"(got {got}, LLEN {r.llen(dead_key(q))})")
            fill(r, q, 66, lambda i: envelope(q, {"m": i}, "boom"))
            got = wait_value(prom, expr, float(r.llen(dead_key(q))))
            check(got == 1300.0 and r.llen(dead_key(q)) == 1300, "Prometheus: dlq_entries follows LLEN", f"(got {got})")
            got = wait_value(prom, 'up{job="dlq-console"}', 1.0)
            check(got == 1.0, "the scrape is up (with the bearer token)")
            age = query(prom, f'dlq_oldest_entry_age_seconds{{queue="{q}"}}')
            check(age is not None and age >= 0, "oldest age exported", f"{age}")
        finally:
            if prom_proc:
                prom_proc.terminate()
                try:
                    prom_proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    prom_proc.kill()
            srv.stop()
    for k in (dead_key(q), dead_key(hostile)):
        r.delete(k)
    finish("console Prometheus")


if __name__ == "__main__":
    main()
