#!/usr/bin/python3
"""Round 10 of issue 27 (not registered with ctest): dlqctl serve memory when request bodies
have ARRIVED WHOLE but wait for a worker, because the workers are held by /healthz requests
waiting on a frozen store (kill -STOP redis-server). ARGS: the console's port, its pid,
the number of body addresses (127.0.0.20 on), connections per address, the Content-Length.
The workers are held by 4 addresses x 4 connections (127.0.0.2-5) asking /healthz (no token
needed); every other connection sends a whole POST body and waits for the answer."""
import socket, sys, threading, time
port, pid, naddr, per, body = (int(a) for a in sys.argv[1:6])


def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024


stop = False


def healthz(addr):
    while not stop:
        try:
            s = socket.socket()
            s.bind((addr, 0))
            s.connect(("127.0.0.1", port))
            s.settimeout(30)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while s.recv(65536):
                pass
            s.close()
        except OSError:
            time.sleep(0.05)


print("before", rss(), "MiB", flush=True)
hs = [threading.Thread(target=healthz, args=("127.0.0.%d" % (2 + a),), daemon=True)
      for a in range(4) for _ in range(4)]
for t in hs:
    t.start()
time.sleep(1.0)
head = ("POST /api/replay HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\n\r\n" % body).encode()
whole = b"x" * body
socks, failed, peak = [], 0, 0
t0 = time.time()
for a in range(naddr):
    for _ in range(per):
        s = socket.socket()
        s.bind(("127.0.0.%d" % (20 + a), 0))
        try:
            s.connect(("127.0.0.1", port))
            s.settimeout(5)
            s.sendall(head + whole)
            socks.append(s)
        except OSError:
            failed += 1
            s.close()
    peak = max(peak, rss())
for _ in range(10):
    time.sleep(0.3)
    peak = max(peak, rss())
print("body connections", len(socks), "failed", failed, "sent in %.1f s" % (time.time() - t0),
      "VmRSS now", rss(), "MiB, peak seen", peak, "MiB", flush=True)
stop = True
for s in socks:
    s.close()
time.sleep(1)
print("closed", rss(), "MiB")
