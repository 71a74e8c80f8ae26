#!/usr/bin/env bash
# The async send path against redis-benchmark's RPUSH on the same private redis-server, one
# connection from one thread: 64 in flight vs `-c 1 -P 64`, awaited one at a time vs
# `-c 1 -P 1`. Rounds interleave the two; medians and their ratio are printed.
# Usage: run_asio.sh <bench_asio_redis binary> [rounds=5] [n=200000]
set -euo pipefail
bin=$1
rounds=${2:-5}
n=${3:-200000}
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --daemonize no --logfile "$dir/log" &
server=$!
trap 'kill $server; wait $server 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
url="redis://127.0.0.1:$port"
# Like with like: redis-benchmark stores values of the envelope's size (-d), measured from an
# entry the bench wrote (a 64-byte non-JSON payload: base64 in a ~308-byte envelope).
"$bin" "$url" 1 1 >/dev/null
size=$(redis-cli -p "$port" --raw lindex 'bench:asio:{q}' 0 | head -c -1 | wc -c)
echo "envelope: $size bytes; redis-benchmark -d $size"
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
rb() {  # requests per second of redis-benchmark RPUSH with pipeline $1
  redis-benchmark -p "$port" -c 1 -P "$1" -n "$2" -t rpush -d "$size" --csv |
    awk -F'","' '/RPUSH/ {print $2}' | tr -d '"'
}
for depth in 64 1; do
  count=$n
  [ "$depth" = 1 ] && count=$((n / 10))
  : >"$dir/dlq" ; : >"$dir/rb"
  for _ in $(seq "$rounds"); do
    redis-cli -p "$port" flushall >/dev/null
    "$bin" "$url" "$count" "$depth" >>"$dir/dlq"
    redis-cli -p "$port" flushall >/dev/null
    rb "$depth" "$count" >>"$dir/rb"
  done
  d=$(median <"$dir/dlq"); r=$(median <"$dir/rb")
  echo "depth $depth: dlq async ${d}/s, redis-benchmark -c 1 -P $depth ${r}/s, ratio $(awk -v a="$d" -v b="$r" 'BEGIN {printf "%.2f", a/b}') (medians of $rounds interleaved rounds, n=$count)"
done
