#!/usr/bin/python3
"""Round 7 of issue 27 (not registered with ctest): dlqctl serve peak memory when 600 small
entries come before 100 of 4 MiB. Run with /usr/bin/python3 (python3-redis), a redis-server
with requirepass secret on the port in /tmp/a7/redis/port, and a running
`dlqctl --store redis://:secret@127.0.0.1:PORT serve`: ARGS = its pid and its URL.
Measured on main 790dc13: filtered /api/entries +806 MiB, /api/entry +804 MiB."""
import sys, time, json, urllib.request
sys.path.insert(0, '/work/attack7/tests/http')
from console_support import envelope, dead_key
import redis
P=int(open('/tmp/a7/redis/port').read()); pid=int(sys.argv[1]); base=sys.argv[2]
r=redis.Redis(port=P,password='secret'); MIB=1<<20
q='grow'
r.delete(dead_key(q))
pipe=r.pipeline()
for i in range(600): pipe.rpush(dead_key(q), envelope(q, {"s":"x"}, f"boom {i}", entry_id=f"s-{i}"))
pipe.execute()
for i in range(100): r.rpush(dead_key(q), envelope(q, {"blob":"a"*(4*MIB)}, f"boom {i}", entry_id=f"big-{i}"))
def hwm():
    for l in open(f'/proc/{pid}/status'):
        if l.startswith('VmHWM'): return int(l.split()[1])//1024
for path in [f"api/entries?queue={q}&error=nomatch", f"api/entry?queue={q}&id=big-99", f"api/entries?queue={q}&limit=500"]:
    open(f'/proc/{pid}/clear_refs','w').write('5'); b=hwm(); t=time.time()
    try:
        with urllib.request.urlopen(base+'/'+path, timeout=300) as resp: st=resp.status; body=resp.read()
    except urllib.error.HTTPError as e: st=e.code; body=e.read()
    print(path, st, len(body), f"peak +{hwm()-b} MiB", f"{time.time()-t:.1f}s", flush=True)
