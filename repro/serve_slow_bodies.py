#!/usr/bin/python3
"""Round 9 of issue 27 (not registered with ctest): dlqctl serve memory when peers from many
addresses send request bodies and never finish them. ARGS: the console's port, its pid, the
number of addresses (127.0.0.2 on), connections per address, the Content-Length; each
connection sends its head and all of the body but one byte, and holds it.
  dlqctl --store sqlite:///tmp/x.db serve --listen 127.0.0.1:18931 &
  repro/serve_slow_bodies.py 18931 $! 31 16 1048576
Measured (default limits): main 59b6934 496 connections kept, VmRSS 11 -> 512 MiB;
attack9 64 kept (max_unsent_bytes, 64 MiB), 432 refused with 503, VmRSS 12 -> 83 MiB."""
import select, socket, sys, time
port, pid, naddr, per, body = (int(a) for a in sys.argv[1:6])


def rss():
    d = {}
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(("VmRSS", "VmHWM")):
            d[line.split(':')[0]] = int(line.split()[1]) // 1024
    return d


print("before", rss(), flush=True)
head = ("POST /api/replay HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\n\r\n" % body).encode()
most = b"x" * (body - 1)
socks, failed = [], 0
for a in range(naddr):
    for _ in range(per):
        s = socket.socket()
        s.bind(("127.0.0.%d" % (2 + a), 0))
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(head)
            s.sendall(most)
            socks.append(s)
        except OSError:
            failed += 1
            s.close()
time.sleep(2)
kept = sum(1 for s in socks if not select.select([s], [], [], 0)[0])  # not answered/closed
print("connections", len(socks), "failed", failed, "kept by the server", kept, "after", rss())
for s in socks:
    s.close()
time.sleep(1)
print("closed", rss())
