#!/usr/bin/env bash
# Redis throughput, as ratios against baselines measured on the same private server in the
# same run: redis-benchmark (RPUSH, 300 B, 1 connection, -P 1 and -P 64), the seed's
# per-item LPOP+RPUSH loop, and a server-side LMOVE loop in one Lua script.
#
#   tests/benchmarks/redis/run.sh [BUILD_DIR] [RUNS]
#   tests/benchmarks/redis/run.sh BUILD_DIR RUNS observability   (issue 12: the stats and
#       errors rows alone; the full run prints them last, with their ratios)
#   tests/benchmarks/redis/run.sh BUILD_DIR RUNS replay   (issue 16: front-end replay_all —
#       the fast path —, the compare-and-move path alone and a queue with every 10th entry
#       from the Python service, each against the LMOVE loop over the same entries,
#       interleaved; then 1, 8, 32 threads sending through one queue against redis-benchmark
#       rpush -c N -P 1, batched (the default) and unbatched; "prototype" is an alias)
#   tests/benchmarks/redis/run.sh BUILD_DIR RUNS sends    (the N-thread send rows alone)
#   tests/benchmarks/redis/run.sh BUILD_DIR RUNS sends_tls   (issue 29: the same rows over
#       TLS: a rediss:// storage against redis-benchmark --tls --cacert … on a TLS-only
#       server with a test CA made for the run; target >= 0.85)
#   tests/benchmarks/redis/run.sh BUILD_DIR RUNS replica_ack   (issue 29: 1, 8, 32 threads
#       sending with RedisListOptions::replicas_to_ack = 1 against = 0, on this server with
#       one local replica started for the run, interleaved)
#
# BUILD_DIR defaults to ./build (configure with -DCMAKE_BUILD_TYPE=Release for real numbers);
# RUNS (default 5) interleaved rounds of every measurement, medians reported (script
# durations: median p50/p99 over rounds, max over all).
set -euo pipefail
build=${1:-build}
runs=${2:-5}
bench="$build/tests/benchmarks/redis/bench_redis"
[ -x "$bench" ] || { echo "run.sh: $bench not built (ninja -C $build bench_redis)" >&2; exit 1; }

dir=$(mktemp -d /tmp/dlq-bench-redis-XXXXXX)
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --daemonize yes --pidfile "$dir/pid" --logfile "$dir/redis.log" >/dev/null
cleanup() {
  [ -f "$dir/replica.pid" ] && kill "$(cat "$dir/replica.pid")" 2>/dev/null
  [ -f "$dir/tls.pid" ] && kill "$(cat "$dir/tls.pid")" 2>/dev/null
  [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null
  sleep 0.2; rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 1 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done

if [ "${3:-}" = observability ]; then  # issue 12: stats 1k vs 1M, errors vs LRANGE paging
  "$bench" "redis://127.0.0.1:$port/0" "$runs" observability
  exit 0
fi
if [ "${3:-}" = replica_ack ]; then  # issue 29 item 3: the cost of waiting for a replica
  rport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$dir/replica"
  redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir/replica" \
    --daemonize yes --pidfile "$dir/replica.pid" --logfile "$dir/replica.log" \
    --replicaof 127.0.0.1 "$port" >/dev/null
  for _ in $(seq 1 200); do
    redis-cli -p "$rport" info replication 2>/dev/null | grep -q master_link_status:up && break
    sleep 0.05
  done
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  acks=$(for round in $(seq 1 "$runs"); do "$bench" "redis://127.0.0.1:$port/0" 1 replica_ack; done)
  aval() { echo "$acks" | awk -v k="$1" '$1==k {print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  for n in 1 8 32; do
    a1=$(aval "dlq_send_ack1_threads_$n"); a0=$(aval "dlq_send_ack0_threads_$n")
    awk -v n="$n" -v a="$a1" -v b="$a0" 'BEGIN { printf "send_to_dlq, %2d threads, replicas_to_ack = 1 / = 0 (one local replica): %8.0f / %8.0f = %.2f\n", n, a, b, a / b }'
  done
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi
# send_rows URL PORT TARGET TAG CLI_ARGS…: N threads (1, 8, 32) sending through one queue
# against redis-benchmark RPUSH -c N -P 1 of values the size of dlq's envelope (300 B
# payload), interleaved per round, on the server at PORT (CLI_ARGS: redis-cli's and
# redis-benchmark's connection options, e.g. --tls --cacert FILE); medians, ratios.
send_rows() {
  local url=$1 p=$2 target=$3 tag=$4
  shift 4
  local env_bytes sends n d r
  env_bytes=$("$bench" "$url" 1 envelope_bytes)
  rbn() {
    redis-benchmark "$@" -p "$p" -t rpush -c "$n" -P 1 -d "$env_bytes" -n 32000 --csv 2>/dev/null |
      awk -F'","' '/RPUSH/ {print $2+0}'
    redis-cli "$@" -p "$p" del mylist >/dev/null
  }
  sends=$(for round in $(seq 1 "$runs"); do
    for n in 1 8 32; do echo "rb_c$n $(rbn "$@")"; done
    "$bench" "$url" 1 threads
  done)
  sval() { echo "$sends" | awk -v k="$1" '$1==k {print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  echo "envelope around a 300 B payload: $env_bytes bytes (redis-benchmark ${*:+$* }-d $env_bytes)"
  # Per round, dlq / redis-benchmark of that round: on a loaded machine the ratio of one
  # round is steadier than either rate (a noisy moment hits both), so both are shown.
  rratios() { echo "$sends" | awk -v d="dlq_send_threads_$1" -v r="rb_c$1" '
    $1 == d { dv[++nd] = $2 } $1 == r { rv[++nr] = $2 }
    END { for (i = 1; i <= nd && i <= nr; i++) printf "%.2f ", dv[i] / rv[i] }'; }
  for n in 1 8 32; do
    d=$(sval "dlq_send_threads_$n"); r=$(sval "rb_c$n"); rr=$(rratios "$n")
    awk -v n="$n" -v d="$d" -v r="$r" -v t="$target" -v tag="$tag" -v rr="$rr" 'BEGIN { x = d / r;
      k = split(rr, a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
        if (a[j] + 0 < a[i] + 0) { s = a[i]; a[i] = a[j]; a[j] = s }
      m = a[int((k + 1) / 2)];
      printf "send_to_dlq%s, %2d threads / redis-benchmark rpush -c %2d -P 1: %8.0f / %8.0f = %.2f %s\n",
             tag, n, n, d, r, x, (x >= t ? "ok" : "MISS (>=" t ")")
      printf "  per-round ratios: %s(median %.2f)\n", rr, m }'
  done
  for n in 1 8 32; do
    d=$(sval "dlq_send_threads_unbatched_$n"); r=$(sval "rb_c$n")
    awk -v n="$n" -v d="$d" -v r="$r" 'BEGIN { printf "  unbatched (PoolOptions::send_batches = 0), %2d threads: %8.0f = %.2f\n", n, d, d / r }'
  done
}

if [ "${3:-}" = replay ] || [ "${3:-}" = prototype ] || [ "${3:-}" = sends ]; then  # issue 16
  url="redis://127.0.0.1:$port/0"
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  [ "${3:-}" = sends ] || "$bench" "$url" "$runs" replay
  send_rows "$url" "$port" 0.9 ""
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi
if [ "${3:-}" = sends_tls ]; then  # issue 29: the same rows over TLS (rediss://)
  # A TLS-only server (certificates of tests/support/redis_support.sh's make_test_certs,
  # client certificates not required) beside the plain one, which this mode leaves idle.
  . "$(dirname "$0")/../../support/redis_support.sh"  # free_port, wait_ping, make_test_certs
  certs=$dir/certs
  make_test_certs "$certs" || { cat "$certs/openssl.log" >&2; exit 1; }
  tport=$(free_port)
  mkdir -p "$dir/tls"
  redis-server --port 0 --tls-port "$tport" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$dir/tls" --daemonize yes --pidfile "$dir/tls.pid" --logfile "$dir/tls.log" \
    --tls-cert-file "$certs/server.crt" --tls-key-file "$certs/server.key" \
    --tls-ca-cert-file "$certs/ca.crt" --tls-auth-clients no >/dev/null
  wait_ping "$tport" --tls --cacert "$certs/ca.crt" || { cat "$dir/tls.log" >&2; exit 1; }
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  send_rows "rediss://127.0.0.1:$tport/0?ca_file=$certs/ca.crt" "$tport" 0.85 " over TLS" \
    --tls --cacert "$certs/ca.crt"
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
rb() {  # redis-benchmark RPUSH rate (requests/s)
  redis-benchmark -p "$port" -t rpush -c 1 -P "$1" -d 300 -n "$2" --csv 2>/dev/null |
    awk -F'","' '/RPUSH/ {print $2+0}'
  redis-cli -p "$port" del mylist >/dev/null
}
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$port; $runs interleaved rounds, medians" >&2
# Rounds interleave every baseline and every measurement, so that a noisy moment on a shared
# machine hits all of them alike instead of one whole block.
results=$(for round in $(seq 1 "$runs"); do
  echo "rb_p1 $(rb 1 50000)"
  echo "rb_p64 $(rb 64 500000)"
  echo "seed_py $(/usr/bin/python3 "$(dirname "$0")/../../interop/seed.py" bench "redis://127.0.0.1:$port/0" bench: q 5000)"
  "$bench" "redis://127.0.0.1:$port/0" 1
  echo "round $round done" >&2
done)
val() { echo "$results" | awk -v k="$1" '$1==k {print $2}' | median; }
maxval() { echo "$results" | awk -v k="$1" '$1==k {print $2}' | sort -n | tail -1; }
rb_p1=$(val rb_p1); rb_p64=$(val rb_p64); seed_py=$(val seed_py)
single=$(val single_send); batch=$(val batch_send_64); replay=$(val replay_all_100k)
lmove=$(val lmove_lua_100k); loop=$(val per_item_loop); slow=$(maxval replay_script_2k_max_us)
slow50=$(val replay_script_2k_p50_us); slow99=$(val replay_script_2k_p99_us)
fslow=$(maxval dlq_replay_script_2k_max_us); fslow50=$(val dlq_replay_script_2k_p50_us)
fslow99=$(val dlq_replay_script_2k_p99_us)
trim=$(val dlq_trim_age_100k); tslow=$(maxval dlq_trim_script_max_us)
tslow50=$(val dlq_trim_script_p50_us); tslow99=$(val dlq_trim_script_p99_us)
flmove=$(val lmove_lua_envelopes_100k); fsingle=$(val dlq_send); fbatch=$(val dlq_send_batch_64); freplay=$(val dlq_replay_all_100k)

awk -v flmove="$flmove" -v fsingle="$fsingle" -v fbatch="$fbatch" -v freplay="$freplay" -v seedpy="$seed_py" \
    -v single="$single" -v batch="$batch" -v replay="$replay" -v lmove="$lmove" -v loop="$loop" \
    -v p1="$rb_p1" -v p64="$rb_p64" -v slow="$slow" -v slow50="$slow50" -v slow99="$slow99" \
    -v fslow="$fslow" -v fslow50="$fslow50" -v fslow99="$fslow99" \
    -v trim="$trim" -v tslow="$tslow" -v tslow50="$tslow50" -v tslow99="$tslow99" 'BEGIN {
  printf "%-44s %12s\n", "measurement (300 B unless said)", "entries/s"
  printf "%-44s %12.0f\n", "redis-benchmark rpush -c 1 -P 1", p1
  printf "%-44s %12.0f\n", "redis-benchmark rpush -c 1 -P 64", p64
  printf "%-44s %12.0f\n", "dlq send (push), 1 connection", single
  printf "%-44s %12.0f\n", "dlq batch send (push_many of 64)", batch
  printf "%-44s %12.0f\n", "dlq replay-all, 100k entries", replay
  printf "%-44s %12.0f\n", "server-side LMOVE loop in one Lua script", lmove
  printf "%-44s %12.0f\n", "per-item LPOP+RPUSH loop (C++, hiredis)", loop
  printf "%-44s %12.0f\n", "the seed replay_all (Python, sync redis-py)", seedpy
  printf "%-44s %12.0f\n", "DeadLetterQueue send_to_dlq (300 B payload)", fsingle
  printf "%-44s %12.0f\n", "DeadLetterQueue send_batch of 64", fbatch
  printf "%-44s %12.0f\n", "DeadLetterQueue replay_all, 100k entries", freplay
  printf "%-44s %12.0f\n", "LMOVE Lua loop over the same envelopes", flmove
  printf "%-44s %12.0f\n", "DeadLetterQueue trim, max_age, 100k entries", trim
  printf "\n%-44s %8s %8s %s\n", "ratio", "measured", "target", ""
  r = single / p1;   printf "%-44s %8.2f %8s %s\n", "send / redis-benchmark -P 1", r, ">=0.9", (r >= 0.9 ? "ok" : "MISS")
  r = batch / p64;   printf "%-44s %8.2f %8s %s\n", "batch send / redis-benchmark -P 64", r, ">=0.7", (r >= 0.7 ? "ok" : "MISS")
  r = replay / loop; printf "%-44s %8.1f %8s %s\n", "replay-all / per-item loop (C++)", r, ">=30", (r >= 30 ? "ok" : "MISS")
  r = replay / seedpy; printf "%-44s %8.1f %8s %s\n", "replay-all / the seed (Python)", r, ">=30", (r >= 30 ? "ok" : "MISS")
  r = replay / lmove; printf "%-44s %8.2f %8s %s\n", "replay-all / LMOVE Lua loop", r, ">=0.5", (r >= 0.5 ? "ok" : "MISS")
  printf "front end (DeadLetterQueue: envelopes built and cut):\n"
  r = fsingle / p1;   printf "%-44s %8.2f %8s %s\n", "send_to_dlq / redis-benchmark -P 1", r, ">=0.9", (r >= 0.9 ? "ok" : "MISS")
  r = fbatch / p64;   printf "%-44s %8.2f %8s %s\n", "send_batch / redis-benchmark -P 64", r, ">=0.7", (r >= 0.7 ? "ok" : "MISS")
  r = freplay / loop; printf "%-44s %8.1f %8s %s\n", "replay_all / per-item loop (C++)", r, ">=30", (r >= 30 ? "ok" : "MISS")
  r = freplay / seedpy; printf "%-44s %8.1f %8s %s\n", "replay_all / the seed (Python)", r, ">=30", (r >= 30 ? "ok" : "MISS")
  r = freplay / flmove; printf "%-44s %8.2f %8s %s\n", "replay_all / LMOVE Lua loop (same entries)", r, ">=0.8", (r >= 0.8 ? "ok" : "MISS")
  printf "%-44s %8d %8s %s\n", "replay script, 2 KB entries, p50 (us)", slow50, "", ""
  printf "%-44s %8d %8s %s\n", "replay script, 2 KB entries, p99 (us)", slow99, "<=5000", (slow99 <= 5000 ? "ok" : "MISS")
  printf "%-44s %8d %8s %s\n", "replay script, 2 KB entries, max (us)", slow, "<=5000", (slow <= 5000 ? "ok" : "MISS (noise? see p99)")
  printf "%-44s %8d %8s %s\n", "replay_all script, 2 KB payloads, p50 (us)", fslow50, "", ""
  printf "%-44s %8d %8s %s\n", "replay_all script, 2 KB payloads, p99 (us)", fslow99, "<=5000", (fslow99 <= 5000 ? "ok" : "MISS")
  printf "%-44s %8d %8s %s\n", "replay_all script, 2 KB payloads, max (us)", fslow, "<=5000", (fslow <= 5000 ? "ok" : "MISS (noise? see p99)")
  r = trim / flmove; printf "%-44s %8.2f %8s %s\n", "age trim of 100k / LMOVE Lua loop", r, "", ""
  printf "%-44s %8d %8s %s\n", "age trim script, 100k entries, p50 (us)", tslow50, "", ""
  printf "%-44s %8d %8s %s\n", "age trim script, 100k entries, p99 (us)", tslow99, "<=5000", (tslow99 <= 5000 ? "ok" : "MISS")
  printf "%-44s %8d %8s %s\n", "age trim script, 100k entries, max (us)", tslow, "<=5000", (tslow <= 5000 ? "ok" : "MISS (noise? see p99)")
}'

# Observability (issue 12): stats() must cost the same on 1M entries as on 1k (one round
# trip, LLEN + LINDEX 0 / -1); errors() over 1M entries (100 B payloads) against reading them
# with plain LRANGE in pages of 1000 on one connection (target: at most 2x).
s1k=$(val stats_1k_us); s1m=$(val stats_1m_us); e1m=$(val errors_1m_s); l1m=$(val lrange_pages_1m_s)
awk -v s1k="$s1k" -v s1m="$s1m" -v e1m="$e1m" -v l1m="$l1m" 'BEGIN {
  printf "\n%-44s %12s\n", "observability", "measured"
  printf "%-44s %12.1f\n", "stats() of a 1k-entry queue (us per call)", s1k
  printf "%-44s %12.1f\n", "stats() of a 1M-entry queue (us per call)", s1m
  printf "%-44s %12.3f\n", "LRANGE pages of 1000 over 1M entries (s)", l1m
  printf "%-44s %12.3f\n", "errors() over 1M entries (s)", e1m
  r = s1m / s1k; printf "%-44s %8.2f %8s %s\n", "stats 1M / stats 1k", r, "<=1.5", (r <= 1.5 ? "ok" : "MISS")
  r = e1m / l1m; printf "%-44s %8.2f %8s %s\n", "errors 1M / LRANGE paging 1M", r, "<=2", (r <= 2 ? "ok" : "MISS")
}'
