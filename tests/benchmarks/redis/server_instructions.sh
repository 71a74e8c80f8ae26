#!/usr/bin/env bash
# Instructions redis-server executes per entry moved (callgrind: exact, unmoved by the load of
# a shared machine, unlike any rate), for the LMOVE loop in one Lua script and for the fast
# replay step's script (include/dlq/redis/scripts/replay_fast.hpp) called as the front end
# calls it (1000 items, 512 KiB budget, chunks of 256, no ids, no snapshot bound) until the
# dead list is empty. Needs valgrind and python3; no build directory.
#
#   tests/benchmarks/redis/server_instructions.sh [N] [PAYLOAD] [HEADER...]
#
# N entries (default 10000) shaped as dlq writes them (dlq/entry.hpp) around PAYLOAD-byte
# JSON string payloads (default 300; 0 = sizes 100-1100 B, mostly distinct within a script).
# HEADER: replay_fast.hpp files to compare (default: this tree's), e.g. a worktree's.
set -euo pipefail
n=${1:-10000}
size=${2:-300}
shift $(($# < 2 ? $# : 2))
here=$(cd "$(dirname "$0")/../../.." && pwd)
[ $# -gt 0 ] || set -- "$here/include/dlq/redis/scripts/replay_fast.hpp"
command -v valgrind >/dev/null || { echo "server_instructions.sh: needs valgrind" >&2; exit 1; }

dir=$(mktemp -d /tmp/dlq-server-instr-XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" redis-server --port "$port" \
  --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/vg.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
for _ in $(seq 1 200); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
c() { redis-cli -p "$port" "$@"; }

# RESP for RPUSH of the n envelopes, 1000 per command.
fill() {
  c del 'bench:dlq:{q}' 'bench:queue:{q}' >/dev/null
  python3 - "$n" "$size" <<'EOF' | c --pipe >/dev/null
import sys, uuid
n, size = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout.buffer
def env(i):
    p = size if size > 0 else 100 + (i * 7919) % 1000
    body = '"' + ('x%07d' % i) * max(0, (p - 10) // 8)
    body = body + 'y' * (p - 1 - len(body)) + '"'
    uid = str(uuid.UUID(int=(0x019acb7e1c2d70008a4f << 48) + i))
    head = ('{"payload_bytes":%d,"original_payload":%s,"id":"%s","queue":"q",'
            '"error":"payment timeout","attempt":3,"worker":"worker-7",'
            '"dead_lettered_at":"2026-11-30T03:32:19.123456+00:00"') % (len(body), body, uid)
    for m in range(1, 9):
        s = head + ',"envelope_bytes":' + str(len(head) + 19 + m) + '}'
        if len(s) == len(head) + 19 + m:
            return s.encode()
def flush(batch):
    parts = [b'RPUSH', b'bench:dlq:{q}'] + batch
    out.write(b'*%d\r\n' % len(parts))
    for x in parts:
        out.write(b'$%d\r\n%s\r\n' % (len(x), x))
batch = []
for i in range(n):
    batch.append(env(i))
    if len(batch) == 1000:
        flush(batch); batch = []
if batch:
    flush(batch)
EOF
}
# The script's Lua text: snapshot_functions joined with the header's replay_fast_text.
lua_of() {
  python3 - "$here/include/dlq/redis/scripts/snapshot.hpp" "$1" <<'EOF'
import re, sys
snap = open(sys.argv[1]).read()
src = open(sys.argv[2]).read()
sf = re.search(r'snapshot_functions\[\] = R"lua\((.*?)\)lua"', snap, re.S).group(1)
body = re.search(r'replay_fast_text = detail::join\(snapshot_functions, R"lua\((.*?)\)lua"',
                 src, re.S).group(1)
sys.stdout.write(sf + body)
EOF
}
# Instructions since the last zeroing, per entry.
measured() {
  rm -f "$dir"/cg."$pid".*
  callgrind_control -d "$pid" >/dev/null
  sleep 0.5
  local f ir
  f=$(ls -t "$dir"/cg."$pid".* | head -1)
  ir=$(grep -m1 '^summary:\|^totals:' "$f" | awk '{print $2}')
  awk -v i="$ir" -v n="$n" 'BEGIN { printf "%.0f", i / n }'
}

fill
callgrind_control -z "$pid" >/dev/null
c eval "local n = 0 while redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT') do n = n + 1 end return n" \
  2 'bench:dlq:{q}' 'bench:queue:{q}' >/dev/null
echo "LMOVE loop in one script: $(measured) instructions per entry (moved $(c llen 'bench:queue:{q}'))"
for h in "$@"; do
  fill
  sha=$(c script load "$(lua_of "$h")")
  callgrind_control -z "$pid" >/dev/null
  while :; do
    m=$(c evalsha "$sha" 3 'bench:dlq:{q}' 'bench:queue:{q}' 'bench:dlq:{q}:runs' 1000 524288 0 256 0 '' 60000 | head -1)
    [ "$m" -gt 0 ] 2>/dev/null || break
  done
  echo "fast step ($h): $(measured) instructions per entry (moved $(c llen 'bench:queue:{q}'))"
done
