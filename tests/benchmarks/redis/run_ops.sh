#!/usr/bin/env bash
# Operator operations on Redis: search over 1M entries vs plain LRANGE paging, and the cost
# of the audit trail on a replay-all of 100k (bench_ops.cpp), on a private server.
#
#   tests/benchmarks/redis/run_ops.sh [BUILD_DIR] [RUNS]
#
# BUILD_DIR defaults to ./build (configure with -DCMAKE_BUILD_TYPE=Release for real numbers);
# RUNS (default 3) interleaved rounds, medians reported.
set -euo pipefail
build=${1:-build}
runs=${2:-3}
bench="$build/tests/benchmarks/redis/bench_redis_ops"
[ -x "$bench" ] || { echo "run_ops.sh: $bench not built (ninja -C $build bench_redis_ops)" >&2; exit 1; }
dir=$(mktemp -d /tmp/dlq-bench-ops-XXXXXX)
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --daemonize yes --pidfile "$dir/pid" --logfile "$dir/redis.log" >/dev/null
cleanup() { [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null; sleep 0.2; rm -rf "$dir"; }
trap cleanup EXIT
for _ in $(seq 1 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$port; $runs interleaved rounds, medians" >&2
"$bench" "redis://127.0.0.1:$port/0" "$runs"
