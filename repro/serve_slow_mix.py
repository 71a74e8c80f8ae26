#!/usr/bin/python3
"""Round 10 of issue 27 (not registered with ctest): dlqctl serve under a mix of slow clients
(ARGS: port, pid, seconds): 30 addresses x 16 connections trickling a request head a byte
every 2 s (slowloris; they reconnect when closed), 4 addresses x 4 connections sending a
1 MiB body a KiB every 0.5 s, while 127.0.0.1 and 127.0.0.250 ask /healthz every 250 ms.
Prints the slowest answer of each and the serve process's peak VmRSS."""
import socket, sys, threading, time, urllib.request
port, pid, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
stop = False


def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024


def slowloris(addr):
    head = b"GET /api/queues HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 200 + b"\r\n\r\n"
    while not stop:
        try:
            s = socket.socket(); s.bind((addr, 0)); s.connect(("127.0.0.1", port))
            for b in head:
                if stop: break
                s.send(bytes([b])); time.sleep(2)
            s.close()
        except OSError:
            time.sleep(0.5)


def slowbody(addr):
    while not stop:
        try:
            s = socket.socket(); s.bind((addr, 0)); s.connect(("127.0.0.1", port))
            s.send(b"POST /api/replay HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 1048576\r\n\r\n")
            for _ in range(1024):
                if stop: break
                s.send(b" " * 1024); time.sleep(0.5)
            s.close()
        except OSError:
            time.sleep(0.5)


worst = {}


def prober(addr):
    while not stop:
        t0 = time.time()
        try:
            s = socket.socket(); s.bind((addr, 0)); s.settimeout(30); s.connect(("127.0.0.1", port))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                d = s.recv(4096)
                if not d: break
                data += d
            ok = data.startswith(b"HTTP/1.1 200")
            s.close()
        except OSError:
            ok = False
        dt = time.time() - t0 if ok else 99
        worst[addr] = max(worst.get(addr, 0), dt)
        time.sleep(0.25)


ts = [threading.Thread(target=slowloris, args=("127.0.0.%d" % (10 + a),), daemon=True)
      for a in range(int(sys.argv[4]) if len(sys.argv) > 4 else 30) for _ in range(16)]
ts += [threading.Thread(target=slowbody, args=("127.0.0.%d" % (50 + a),), daemon=True)
       for a in range(4) for _ in range(4)]
ts += [threading.Thread(target=prober, args=(a,), daemon=True) for a in ("127.0.0.1", "127.0.0.250")]
peak = rss()
for t in ts: t.start()
t0 = time.time()
while time.time() - t0 < secs:
    time.sleep(0.5); peak = max(peak, rss())
stop = True
print("slowest /healthz: " + ", ".join(f"{a} {w*1000:.0f} ms" for a, w in sorted(worst.items())),
      f"; peak VmRSS {peak} MiB", flush=True)
