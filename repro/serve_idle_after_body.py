#!/usr/bin/python3
"""Round 10 of issue 27 (not registered with ctest): dlqctl serve memory while connections
idle (kept alive) after a 1 MiB body each. ARGS: port, pid, addresses, per address, bytes."""
import socket, sys, time
port, pid, naddr, per, body = (int(a) for a in sys.argv[1:6])
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
print("before", rss(), flush=True)
head = ("POST /api/replay HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\n\r\n" % body).encode()
socks = []
ans = {}
for a in range(naddr):
    for _ in range(per):
        s = socket.socket(); s.bind(("127.0.0.%d" % (20 + a), 0)); s.connect(("127.0.0.1", port))
        s.sendall(head + b"x" * body); socks.append(s)
for s in socks:
    s.settimeout(10)
    d = s.recv(65536)
    st = d.split(b"\r\n")[0].decode(); ans[st] = ans.get(st, 0) + 1
print("answers", ans, flush=True)
t0 = time.time()
while time.time() - t0 < 14:
    print("%.0fs after the answers: VmRSS %d MiB" % (time.time() - t0, rss()), flush=True)
    time.sleep(2)
