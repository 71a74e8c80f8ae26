#!/usr/bin/python3
"""`dlqctl serve` against slow clients: 8 idle connections and 64 that send their request head
one byte every 2 s, all from 127.0.0.2, while 127.0.0.1 asks for /healthz and an
authenticated /api/queues; those must be answered promptly all along (serve runs the console
on a dlq::http::GuardedServer, see docs/console.md "Slow and greedy clients").

    test_console_slow_serve.py --dlqctl PATH      (ctest: fixture `redis`)
"""
import argparse
import os
import socket
import tempfile
import threading
import time

from console_support import Serve, call, check, finish, redis_url

DB = 9
TOKEN = "slow-serve-test-token-0123456789abcdef"


def connect_from(address, port):
    s = socket.socket()
    s.bind((address, 0))
    s.connect(("127.0.0.1", port))
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    with tempfile.NamedTemporaryFile("w", delete=False) as f:
        f.write(TOKEN + "\n")
        token_file = f.name
    os.chmod(token_file, 0o600)
    srv = Serve(args.dlqctl, redis_url(DB), "--token-file", token_file)
    peers = []
    stop = threading.Event()
    try:
        peers = [connect_from("127.0.0.2", srv.port) for _ in range(8)]        # idle
        slow = [connect_from("127.0.0.2", srv.port) for _ in range(64)]        # dribbling
        peers += slow
        head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "

        def dribble():
            i = 0
            while not stop.is_set():
                byte = head[i:i + 1] if i < len(head) else b"a"
                for s in slow:
                    try:
                        s.send(byte, socket.MSG_DONTWAIT)
                    except OSError:
                        pass
                i += 1
                stop.wait(2.0)

        t = threading.Thread(target=dribble)
        t.start()
        time.sleep(0.3)
        worst = 0.0
        failures = []
        until = time.time() + 4.0
        while time.time() < until:
            for path, token in (("healthz", None), ("api/queues", TOKEN)):
                t0 = time.time()
                try:
                    status, _, _ = call(srv.url, path, token=token, timeout=10)
                except OSError as e:
                    status = repr(e)
                worst = max(worst, time.time() - t0)
                if status != 200:
                    failures.append((path, status))
            time.sleep(0.25)
        stop.set()
        t.join()
        check(not failures, "every /healthz and /api/queues from 127.0.0.1 answered 200", f"{failures[:5]}")
        check(worst < 1.5, "answered promptly while slow peers hold connections", f"(slowest {worst:.3f} s)")
        # the per-address cap: 16 connections of 127.0.0.2 admitted, the other 56 closed at once
        closed = 0
        for s in peers:
            s.settimeout(0.05)
            try:
                data = s.recv(4096)
                closed += 1 if data == b"" or data.startswith(b"HTTP/1.1 503") else 0
            except socket.timeout:
                pass
            except OSError:
                closed += 1
        check(closed == 56, "connections beyond 16 per address closed (503)", f"({closed} of 72 closed)")
    finally:
        stop.set()
        for s in peers:
            s.close()
        srv.stop()
        os.unlink(token_file)
    finish("test_console_slow_serve")


if __name__ == "__main__":
    main()
